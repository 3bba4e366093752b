"""Floor / ceiling calibration of BugFix-v2, LongHorizon-v1 and LongHorizon-v3 with scripted agents (no torch);
the command line, and the start-model rows of ``--start-model``, are :mod:`experiments.calibrate.band`.

    python -m experiments.calibrate                      # every BugFix preset + LongHorizon
    python -m experiments.calibrate --episodes 2000 --difficulties easy --mistake-rates 0.03 0.1

Per BugFix difficulty: the **ceiling** (the informed oracle: it reads the program and the failing
tests; faults off), the **noisy** oracle at each ``--mistake-rates`` value (the preset's faults
on), and the **floor**: the BugFix spec's floor agents (``envs.floor_agents``: the program-blind
agents and ``random``; faults off, which only helps them). LongHorizon (default knobs): oracle
(ceiling), ``forgetful`` (tries approaches without remembering failures) and ``random`` (floor).
LongHorizon-v3, one block per ``--horizons`` value (``n_stages``, default 8 32 64 128): oracle
(ceiling), ``context_reader`` (decides from its own context only) and the floors ``program_blind``
(never reads the notes), ``forgetful`` (loses the notes after 3 observations) and ``random``; its
``check`` line asks ceiling >= 0.95 and every floor <= 0.10.

One row per (env / difficulty, agent): episodes, masked episodes (infrastructure crashes:
excluded, never counted as a failure), successes / scored episodes (``info["verified"]``, the
evaluation verifier), the success rate with its 95 % Wilson interval, the outcome-based hack rate
(``train_reward > 0`` and ``verified == 0``), the training-reward rate (``train_reward > 0``: what the
training grader pays, verified or not), the fraction of episodes with a detector match, mean
turns and mean simulated tool seconds. Episode ``i`` plays task ``task_index = i`` of ``--split``
with env seed ``seed + i`` (agents get their own stream of the same seed), so a fixed seed
reproduces the table exactly. The closing ``check`` lines compare each BugFix difficulty with the
targets: ceiling >= 0.95, every floor agent <= 0.10, and visible-test fitting (``fit_visible``)
earning training reward in <= 1 % of episodes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tqdm import tqdm

import envs
from algos.metrics import binomial_confidence_interval
from envs.bugfix import is_hack
from envs.episode import run_episode

DEFAULT_MISTAKE_RATES = (0.03, 0.1)
CEILING_TARGET = 0.95
FLOOR_TARGET = 0.10
FIT_REWARD_TARGET = 0.01  # training-reward rate of the visible-test fitting agent
FIT_AGENT = "fit_visible"
FLOOR_AGENTS = envs.floor_agents(envs.BUGFIX_ID)
# difficulties whose floor target does not apply, and why: tutorial is the learning checks' task
# set (learn_tiny, the claims' update mechanics; configs/experiment/bugfix_tutorial_tasks.yaml),
# where 10 turns leave a blind search several guesses (about 0.4), so its floor is reported beside
# every result instead
FLOOR_TARGET_EXEMPT = {"tutorial": "the learning checks' task set: its floor is reported beside every result"}
LONG_HORIZON_AGENTS = (("oracle", "ceiling"), ("forgetful", "middle"), ("random", "floor"))
DEFAULT_HORIZONS = (8, 32, 64, 128)
LONG_HORIZON_V3_AGENTS = (("oracle", "ceiling"), ("context_reader", "ceiling"),
                          *((a, "floor") for a in envs.floor_agents(envs.LONG_HORIZON_V3_ID)))


@dataclass(frozen=True)
class Row:
    env: str
    difficulty: str
    agent: str
    role: str
    faults: bool
    mistake_rate: float | None
    episodes: int
    masked: int
    successes: int
    rewarded: int
    hacked: int
    flagged: int
    mean_turns: float
    mean_tool_seconds: float

    @property
    def scored(self) -> int:
        return self.episodes - self.masked

    @property
    def success(self) -> float:
        return self.successes / self.scored if self.scored else float("nan")

    @property
    def reward_rate(self) -> float:
        """Training-reward rate: unmasked episodes with ``train_reward > 0``."""
        return self.rewarded / self.scored if self.scored else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        if not self.scored:
            return float("nan"), float("nan")
        return binomial_confidence_interval(self.successes, self.scored, 0.95)


def play(env_id: str, difficulty: str, agent_name: str, episodes: int, seed: int, split: str = "heldout",
         faults: bool = True, mistake_rate: float | None = None, progress: tqdm | None = None,
         env_kwargs: dict | None = None) -> list[dict]:
    """The final infos of ``episodes`` episodes of one agent (task_index i, seed seed + i). The env
    and the agent come from ``env_id``'s spec (``envs.spec_of``): an env with difficulty presets
    (``default_difficulty`` set) is built with ``difficulty`` and, when ``faults`` is false,
    ``faults=False``; for any other env ``difficulty`` is not read and neither is ``faults``.
    ``env_kwargs``: further constructor knobs of the env (e.g. BugFix ``program_lines``), applied
    under ``difficulty`` / ``faults``."""
    kwargs = {"mistake_rate": mistake_rate} if mistake_rate is not None else {}
    knobs = dict(env_kwargs or {})
    if envs.spec_of(env_id).default_difficulty is not None:
        knobs = {**knobs, "difficulty": difficulty, **({} if faults else {"faults": False})}
    env = envs.make(env_id, **knobs)
    agent = envs.scripted_agent(env_id, agent_name, **kwargs)
    infos = []
    for i in range(episodes):
        infos.append(run_episode(env, agent, seed=seed + i, options={"split": split, "task_index": i}).final_info)
        if progress is not None:
            progress.update(1)
    env.close()
    return infos


def count(env_id: str, label: str, agent_name: str, role: str, faults: bool, mistake_rate: float | None,
          infos: list[dict]) -> Row:
    """The row ``label`` of an agent's episodes (their final infos): outcomes counted, turns and
    tool seconds averaged."""
    scored = [i for i in infos if not i["masked"]]
    return Row(env_id, label, agent_name, role, faults, mistake_rate, len(infos), len(infos) - len(scored),
               sum(int(i["verified"]) for i in scored), sum(int(i["train_reward"] > 0) for i in scored),
               sum(int(is_hack(i["train_reward"], i["verified"])) for i in scored),
               sum(int(any(i["hack_flags"].values())) for i in infos),
               sum(i["turn"] for i in infos) / len(infos), sum(i["tool_seconds"] for i in infos) / len(infos))


def family_rows(env_id: str, difficulty: str, agent_name: str, role: str, faults: bool,
                mistake_rate: float | None, infos: list[dict]) -> list[Row]:
    """The row of ``difficulty`` and, for a task mixture (episodes of more than one
    ``info["family"]``), one row per family labelled ``<difficulty>/<family>`` from the same
    episodes."""
    rows = [count(env_id, difficulty, agent_name, role, faults, mistake_rate, infos)]
    families = list(dict.fromkeys(i["family"] for i in infos if "family" in i))
    if len(families) > 1:
        rows += [count(env_id, f"{difficulty}/{f}", agent_name, role, faults, mistake_rate,
                       [i for i in infos if i.get("family") == f]) for f in families]
    return rows


def measure(env_id: str, difficulty: str, agent_name: str, role: str, episodes: int, seed: int,
            split: str = "heldout", faults: bool = True, mistake_rate: float | None = None,
            progress: tqdm | None = None, env_kwargs: dict | None = None) -> Row:
    """Play ``episodes`` episodes of one agent (:func:`play`) and count their outcomes in one row."""
    infos = play(env_id, difficulty, agent_name, episodes, seed, split, faults, mistake_rate, progress, env_kwargs)
    return count(env_id, difficulty, agent_name, role, faults, mistake_rate, infos)


def plan(difficulties, mistake_rates, long_horizon: bool, horizons=()) -> list[tuple]:
    """The (env id, difficulty, agent, role, faults, mistake rate) of every row, in print order;
    a LongHorizon-v3 row's difficulty is ``stages=<n_stages>``."""
    rows = []
    for d in difficulties:
        rows.append((envs.BUGFIX_ID, d, "oracle", "ceiling", False, None))
        rows += [(envs.BUGFIX_ID, d, "noisy_oracle", "noisy", True, m) for m in mistake_rates]
        rows += [(envs.BUGFIX_ID, d, a, "floor", False, None) for a in FLOOR_AGENTS]
    if long_horizon:
        rows += [(envs.LONG_HORIZON_ID, "default", a, role, True, None) for a, role in LONG_HORIZON_AGENTS]
    for h in horizons:
        rows += [(envs.LONG_HORIZON_V3_ID, f"stages={h}", a, role, True, None) for a, role in LONG_HORIZON_V3_AGENTS]
    return rows


def _env_kwargs(env_id: str, difficulty: str) -> dict:
    """Constructor knobs of a row: ``n_stages`` of a LongHorizon-v3 row, none otherwise."""
    if env_id == envs.LONG_HORIZON_V3_ID:
        return {"n_stages": int(difficulty.split("=")[1])}
    return {}


def calibrate(difficulties, episodes: int, seed: int = 0, mistake_rates=DEFAULT_MISTAKE_RATES,
              split: str = "heldout", long_horizon: bool = True, horizons=()) -> list[Row]:
    todo = plan(difficulties, mistake_rates, long_horizon, horizons)
    rows: list[Row] = []
    with tqdm(total=len(todo) * episodes, desc="calibrate", unit="ep", file=sys.stderr, disable=None) as bar:
        for e, d, a, role, faults, m in todo:
            infos = play(e, d, a, episodes, seed, split, faults, m, bar, _env_kwargs(e, d))
            rows += family_rows(e, d, a, role, faults, m, infos)
    return sorted(rows, key=lambda r: (todo_order(todo, r), r.difficulty.count("/"), r.difficulty))


def todo_order(todo: list[tuple], row: Row) -> int:
    """Print order: a mixture's family rows after every row of the mixture itself, by family."""
    base = row.difficulty.split("/")[0]
    return min(i for i, t in enumerate(todo) if t[0] == row.env and t[1] == base)


def format_table(rows: list[Row]) -> str:
    dw = max([10, *(len(r.difficulty) for r in rows)])
    header = (f"{'env':<14} {'difficulty':<{dw}} {'agent':<16} {'role':<7} {'faults':<6} {'mistake':>7} "
              f"{'episodes':>8} {'masked':>6} {'successes':>11} {'success':>7}  {'95% CI':<16} "
              f"{'reward':>6} {'hack':>5} {'flagged':>7} {'turns':>5} {'tool_s':>6}")
    lines = [header, "-" * len(header)]
    for r in rows:
        low, high = r.interval
        mistake = "-" if r.mistake_rate is None else f"{r.mistake_rate:.3f}"
        lines.append(
            f"{r.env.split('/')[-1]:<14} {r.difficulty:<{dw}} {r.agent:<16} {r.role:<7} {'on' if r.faults else 'off':<6} "
            f"{mistake:>7} {r.episodes:>8} {r.masked:>6} {f'{r.successes}/{r.scored}':>11} {r.success:>7.3f}  "
            f"[{low:.3f}, {high:.3f}]  {r.reward_rate:>6.3f} {r.hacked / max(r.scored, 1):>5.3f} {r.flagged / r.episodes:>7.3f} "
            f"{r.mean_turns:>5.2f} {r.mean_tool_seconds:>6.1f}"
        )
    return "\n".join(lines)


def checks(rows: list[Row]) -> list[str]:
    """One line per BugFix difficulty: ceiling >= 0.95, every floor agent <= 0.10, fitting's
    training-reward rate <= 0.01; before them one line per LongHorizon-v3 horizon: every ceiling
    agent >= 0.95, every floor agent <= 0.10."""
    first = []
    for d in dict.fromkeys(r.difficulty for r in rows if r.env == envs.LONG_HORIZON_V3_ID):
        mine = [r for r in rows if r.env == envs.LONG_HORIZON_V3_ID and r.difficulty == d]
        low = min((r for r in mine if r.role == "ceiling"), key=lambda r: r.success)
        worst = max((r for r in mine if r.role == "floor"), key=lambda r: r.success)
        first.append(f"check LongHorizon-v3 {d}: ceiling min {low.success:.3f} ({low.agent}) >= {CEILING_TARGET:.2f} "
                   f"{'ok' if low.success >= CEILING_TARGET else 'FAIL'} | floor max {worst.success:.3f} ({worst.agent}) "
                   f"<= {FLOOR_TARGET:.2f} {'ok' if worst.success <= FLOOR_TARGET else 'FAIL'}")
    out = []
    for d in dict.fromkeys(r.difficulty for r in rows if r.env == envs.BUGFIX_ID):
        mine = [r for r in rows if r.env == envs.BUGFIX_ID and r.difficulty == d]
        ceiling = [r for r in mine if r.role == "ceiling"]
        floor = [r for r in mine if r.role == "floor"]
        parts = []
        if ceiling:
            c = ceiling[0].success
            parts.append(f"ceiling {c:.3f} >= {CEILING_TARGET:.2f} {'ok' if c >= CEILING_TARGET else 'FAIL'}")
        if floor:
            worst = max(floor, key=lambda r: r.success)
            ok = worst.success <= FLOOR_TARGET
            parts.append(f"floor max {worst.success:.3f} ({worst.agent}) <= {FLOOR_TARGET:.2f} {'ok' if ok else 'FAIL'}")
        fit = [r for r in floor if r.agent == FIT_AGENT]
        if fit:
            rate = fit[0].reward_rate
            ok = rate <= FIT_REWARD_TARGET
            parts.append(f"fitting reward {rate:.3f} <= {FIT_REWARD_TARGET:.2f} {'ok' if ok else 'FAIL'}")
        note = f" (the floor target does not apply: {FLOOR_TARGET_EXEMPT[d]})" if d in FLOOR_TARGET_EXEMPT else ""
        out.append(f"check {d}: " + " | ".join(parts) + note)
    return first + out
