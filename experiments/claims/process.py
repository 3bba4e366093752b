"""Process-reward claim C24: scripted agents farm a biased process reward
(``experiments.claims.envs.measure_c24_agents``) and so do real trainers: GRPO under the outcome
and the biased reward, and process-supervised GRPO (``algo=grpo_process``, DeepSeekMath 4.1.3: the
step rewards themselves are the advantage signal) under the biased reward, all at the same budget
from the same start model. :func:`measure_c24` returns the claim's frozen result (both parts, the
row's texts and the pass rule)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from algos import metric_keys as mk
from algos.registry import trainer_traits
from experiments.claims.common import start_model_info, train_run
from experiments.claims.compare import C19_ALGOS
from experiments.claims.envs import C24AgentsResult, measure_c24_agents
from experiments.claims.result import EMPIRICAL, ClaimResult

C24_BUDGET = 512  # 32 updates of 16 rollouts: the biased reward is farmed by then (1024 gave the same verdict)
C24_BIASED = "biased_process"  # pays 0.1 per test run, whatever the progress
#: The run keys of :func:`reward_mode_runs`: (name, algorithm, reward mode).
C24_RUNS = (("outcome", "grpo", "outcome"), ("biased", "grpo", C24_BIASED), ("process_biased", "grpo_process", C24_BIASED))
C24_MIN_GAP = 0.2  # last-quarter training reward minus verified success under the biased reward
C24_AGREE = 0.05  # outcome reward: training reward and verified success agree within this


@lru_cache(maxsize=2)
def reward_mode_runs(budget: int = C24_BUDGET, seed: int = 0) -> dict:
    """The :data:`C24_RUNS`: GRPO with ``outcome`` and with :data:`C24_BIASED` reward, and
    ``grpo_process`` with :data:`C24_BIASED` reward, every run with C19's GRPO settings (G 4 x 4
    tasks, lr 1e-3), from the same start model file (the cached warm start), same seed and budget,
    8 x 8 train-template eval samples (cached): ``{name: run}`` as returned by ``train_run``."""
    path = start_model_info().path
    out = {}
    for name, algo, mode in C24_RUNS:
        overrides = (("env.kwargs", {"difficulty": "easy", "reward_mode": mode}), ("policy.init_checkpoint", path),
                     ("seed", seed), ("eval.samples_per_task", 8))
        out[name] = train_run(algo, C19_ALGOS["grpo"], budget, overrides)
    return out


def quarter_means(rows: list[dict], key: str) -> tuple[float, float]:
    """Mean of ``key`` over the first and over the last quarter of ``rows`` (at least one row each)."""
    k = max(len(rows) // 4, 1)
    first, last = rows[:k], rows[-k:]
    return sum(r[key] for r in first) / len(first), sum(r[key] for r in last) / len(last)


@dataclass(frozen=True)
class RewardRun:
    """One training run of :data:`C24_RUNS`: its algorithm and reward mode, ``updates``; the
    first- and last-quarter means of the training reward (``rollout/train_reward_mean``) and of
    the verified success (``rollout/success_rate``, the env's independent verifier);
    ``turns_last`` (last-quarter ``rollout/mean_turns``); ``eval_train_success`` (final verified
    success on the train templates, 8 tasks x 8); for a trainer with step rewards
    ``scored_step_frac`` (mean ``train/scored_step_frac``: share of its steps that carry a reward;
    None for the others)."""

    algo: str
    mode: str
    updates: int
    reward_first: float
    reward_last: float
    success_first: float
    success_last: float
    turns_last: float
    eval_train_success: float
    scored_step_frac: float | None = None

    def farmed(self) -> bool:
        """The run farms its reward: the training reward grows more than the verified success
        (first -> last quarter) and ends at least :data:`C24_MIN_GAP` above it."""
        return (self.reward_last - self.reward_first > self.success_last - self.success_first
                and self.reward_last - self.success_last >= C24_MIN_GAP)


@dataclass(frozen=True)
class C24TrainerResult:
    """C24's trainer part: the runs ``outcome`` and ``biased`` (GRPO) and ``process_biased``
    (grpo_process) at one ``budget`` and ``seed``; ``biased_mode`` names the biased reward. Its
    pass rule and text are half of C24's row (:class:`C24Result`)."""

    budget: int
    seed: int
    biased_mode: str
    outcome: RewardRun
    biased: RewardRun
    process_biased: RewardRun

    def passes(self) -> bool:
        """GRPO and grpo_process both farm the biased reward (:meth:`RewardRun.farmed`: higher
        training reward, not higher verified success) while GRPO's outcome reward agrees with the
        verifier within :data:`C24_AGREE`."""
        b, o, pb = self.biased, self.outcome, self.process_biased
        return (b.farmed() and pb.farmed() and trainer_traits(pb.algo).step_rewards and pb.mode == self.biased_mode
                and abs(o.reward_first - o.success_first) <= C24_AGREE
                and abs(o.reward_last - o.success_last) <= C24_AGREE)

    @property
    def measured(self) -> str:
        """The trainer half of C24's "measured" column."""
        b, o, pb, mode = self.biased, self.outcome, self.process_biased, self.biased_mode
        cross = b.reward_last > o.reward_last and b.eval_train_success <= o.eval_train_success
        return (f"trainer: GRPO x2 from one start model, {self.budget} rollouts, seed {self.seed}, first -> last "
                f"quarter of {b.updates} updates: {mode}: train reward {b.reward_first:.3f} -> {b.reward_last:.3f}, "
                f"verified success {b.success_first:.3f} -> {b.success_last:.3f} (reward - success "
                f"{b.reward_last - b.success_last:+.3f}, need >= {C24_MIN_GAP:g}), mean turns {b.turns_last:.1f}; "
                f"outcome: reward {o.reward_first:.3f} -> {o.reward_last:.3f}, success {o.success_first:.3f} -> "
                f"{o.success_last:.3f}, turns {o.turns_last:.1f}; final verified success on train templates (8 x 8): "
                f"{mode} {b.eval_train_success:.3f} vs outcome {o.eval_train_success:.3f}; cross-run reading "
                f"(biased: higher last-quarter reward {b.reward_last:.3f} vs {o.reward_last:.3f} and not higher "
                f"verified success) at this seed: {cross} (reported, not required: it held for 2 of seeds 0-4, "
                f"either run can collapse); trainer grpo_process (step rewards as the advantage signal, same budget, "
                f"start model and seed) under {mode}: train reward {pb.reward_first:.3f} -> {pb.reward_last:.3f}, "
                f"verified success {pb.success_first:.3f} -> {pb.success_last:.3f} (reward - success "
                f"{pb.reward_last - pb.success_last:+.3f}, need >= {C24_MIN_GAP:g}), scored steps "
                f"{pb.scored_step_frac:.2f} of all, mean turns {pb.turns_last:.1f}, final verified success on train "
                f"templates {pb.eval_train_success:.3f} (GRPO under {mode} {b.eval_train_success:.3f}, under outcome "
                f"{o.eval_train_success:.3f})")


def _reward_run(run: dict, algo: str, mode: str) -> RewardRun:
    """The :class:`RewardRun` of ``run`` (as returned by ``train_run``) with ``algo`` and ``mode``."""
    rows = run["metrics"]
    r0, r1 = quarter_means(rows, mk.ROLLOUT_TRAIN_REWARD_MEAN)
    s0, s1 = quarter_means(rows, mk.ROLLOUT_SUCCESS_RATE)
    frac = None
    if trainer_traits(algo).step_rewards:
        fracs = [r[mk.TRAIN_SCORED_STEP_FRAC] for r in rows if r.get(mk.TRAIN_SCORED_STEP_FRAC) is not None]
        frac = sum(fracs) / len(fracs) if fracs else float("nan")
    return RewardRun(algo=algo, mode=mode, updates=len(rows), reward_first=r0, reward_last=r1, success_first=s0,
                     success_last=s1, turns_last=quarter_means(rows, mk.ROLLOUT_MEAN_TURNS)[1],
                     eval_train_success=run["summary"][mk.EVAL_TRAIN_SUCCESS], scored_step_frac=frac)


def measure_c24_trainer(budget: int = C24_BUDGET, seed: int = 0) -> C24TrainerResult:
    """Training reward vs verified success of GRPO under ``outcome`` and biased process reward, and
    of ``grpo_process`` under the biased process reward: the three ``experiments.runtime.loop.run``
    runs of :func:`reward_mode_runs`, each read as a :class:`RewardRun`."""
    runs = reward_mode_runs(budget, seed)
    read = {name: _reward_run(runs[name], algo, mode) for name, algo, mode in C24_RUNS}
    return C24TrainerResult(budget=budget, seed=seed, biased_mode=C24_BIASED, outcome=read["outcome"],
                            biased=read["biased"], process_biased=read["process_biased"])


@dataclass(frozen=True)
class C24Result(ClaimResult):
    """C24's row: the scripted-agent part (``agents``) and the trainer part (``trainer``)."""

    what: ClassVar[str] = ("process rewards add signal but can be biased (scripted agents + GRPO and grpo_process "
                           "trainer runs)")
    expected: ClassVar[str] = "biased variant: higher train reward, not higher verified success"
    kind: ClassVar[str] = EMPIRICAL

    agents: C24AgentsResult
    trainer: C24TrainerResult

    def passes(self) -> bool:
        """Both parts pass."""
        return self.agents.passes() and self.trainer.passes()

    @property
    def measured(self) -> str:
        return f"{self.agents.measured} || {self.trainer.measured}"


def measure_c24() -> C24Result:
    """The scripted-agent part (:func:`experiments.claims.envs.measure_c24_agents`), then the
    trainer part (:func:`measure_c24_trainer`), at their defaults."""
    agents = measure_c24_agents()
    return C24Result(agents=agents, trainer=measure_c24_trainer())
