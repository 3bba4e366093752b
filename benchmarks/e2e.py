"""End-to-end training throughput of the current tree next to a baseline tree, side by side.

    python -m benchmarks e2e --baseline DIR [--repeats 3] [--quick]   # DIR: a checkout of the baseline commit
    python -m benchmarks e2e --no-baseline [--quick]                  # the current tree only
                                    [--algo grpo --algo ppo] [--amount 1280] [--set key=value ...]

For every repeat, every method (``--algo``) and both trees (interleaved, so machine load hits both
alike), the real entry point runs as a subprocess::

    python -m experiments.train experiment=learn_bugfix algo=<m> budget.amount=<amount>
        run_dir=<tmp> logger=none progress=false warmstart.cache_dir=<.cache/bench_e2e/<tree>>

with ``PYTHONPATH`` and the working directory set to that tree. Each tree keeps its own warm
start cache under ``.cache/bench_e2e/`` (built by the first run, ~2 min; reused after). From each
run's ``metrics.jsonl`` / ``summary.json`` (``run_stats``):

  trajectory tok/s   (generated + observation tokens of the training rollouts) / run wall time
                     (``summary.json: wall_seconds_this_process``: the training loop, evaluations
                     included; the process wall time when the field is missing)
  gen tok/s          generated tokens / time in ``rollout/collect_seconds`` (rollout generation)
  update tok/s       epochs x real tokens / ``train/update_seconds`` (summed over updates)
  padding eff.       real tokens / computed positions of the update's forwards
                     (``train/padding_efficiency``; the baseline pads every row to the batch's
                     longest segment and logs no such field, so it is derived there as
                     ``train/tokens / (train/rows * train/max_row_len)`` when available)
  peak RSS           ``ru_maxrss`` of that child (``os.wait4``)

Medians over repeats, and the median of the paired ``current / baseline`` ratios (``Table.ratio``). Then, in this process (current tree),
``bound``: one update of the current trainer on a freshly collected batch of the learn preset
against the equal-length bound: forward + backward + AdamW of the same model(s), the same number
of optimizer steps, on rows of equal length holding the same number of tokens.

The machine may be shared: absolute numbers are noisy; the side-by-side ratios are the result.

Where the time went (cProfile, 1 thread, the learn preset's warm-start policy, one batch of 64
rollouts = 64 rows / ~12.4k tokens, mean segment 194, longest ~290; commit 688a06a vs now):
  update   baseline: every row padded to the batch's longest segment (padding efficiency ~0.65),
           full [R, T, 540] logits + log-softmax in the old pass and in every training forward.
           Now: rows sorted into length buckets per micro-batch and trimmed (``algos.batch.
           length_buckets``: efficiency ~0.95), logits only before the loss tokens
           (``PolicyModel.forward_at``), the last block only at the positions anything reads
           (``Block.forward_at``; a separate critic's values likewise). The rest is backward
           (~55 %), causal attention (~20 %, SDPA with head dim 16) and the linears.
  rollout  baseline: one prefill forward (observations) plus one decode forward per engine step,
           padded; ``torch.multinomial`` ~2.5 ms per step. Now: one packed forward per step
           (per-token layers on real new tokens only, last block only at each row's last token)
           and inverse-CDF sampling; what is left is attention over the KV cache (memory bound),
           the linears and the env (~15 %).
``--quick``: 1 repeat, one update (the plumbing check). ``--set`` adds Hydra overrides to every
run (e.g. ``--set policy.d_model=32`` for a smaller model).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from algos import metric_keys as mk
from algos.policy import build_models, shift_logprobs
from algos.requests import make_requests
from algos.trainer import make_trainer
from experiments.compare.job import DEFAULT_METHODS
from experiments.runtime.build import load_policy_weights, policy_shape, train_engine
from experiments.runtime.config import compose_config, validate
from experiments.runtime.schema import resolve_critic
from experiments.runtime.warmstart import ensure_warmstart

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"trajectory_tok_s": 4.0, "gen_tok_s": 2.0, "padding_efficiency": 0.9, "bound_fraction": 0.7,
           "peak_rss_mb": 1024.0}


@dataclass
class RunStats:
    """One run's numbers (``run_stats``)."""

    trajectory_tokens: float
    wall_seconds: float
    generated_tokens: float
    collect_seconds: float
    update_tokens: float  # epochs x real tokens, summed over updates
    update_seconds: float
    padding_efficiency: float | None
    peak_rss_mb: float
    updates: int
    process_seconds: float = 0.0

    @property
    def trajectory_tok_s(self) -> float:
        return self.trajectory_tokens / max(self.wall_seconds, 1e-9)

    @property
    def gen_tok_s(self) -> float:
        return self.generated_tokens / max(self.collect_seconds, 1e-9)

    @property
    def update_tok_s(self) -> float:
        return self.update_tokens / max(self.update_seconds, 1e-9)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_stats(lines: list[dict], summary: dict, epochs: int, peak_rss_mb: float, process_seconds: float) -> RunStats:
    """Aggregate a run's per-update metrics lines and summary into ``RunStats``.

    Trajectory tokens are the cumulative ``compute/generated_tokens + compute/observation_tokens``
    of the last line; generated tokens per collect second are summed over updates
    (``rollout/generated_tokens_per_second * rollout/collect_seconds``); the update's tokens are
    ``epochs * train/tokens``. Padding efficiency is token-weighted over updates: ``sum(tokens) /
    sum(tokens / eff)``. Raises ``ValueError`` naming a missing field."""
    if not lines:
        raise ValueError("metrics.jsonl has no update lines")
    last = lines[-1]
    for key in (mk.COMPUTE_GENERATED_TOKENS, mk.COMPUTE_OBSERVATION_TOKENS):
        if key not in last:
            raise ValueError(f"metrics.jsonl lacks {key!r}; has {sorted(k for k in last if k.startswith(mk.COMPUTE))}")
    trained = [m for m in lines if mk.TRAIN_UPDATE_SECONDS in m and mk.TRAIN_TOKENS in m]
    collect = sum(float(m[mk.ROLLOUT_COLLECT_SECONDS]) for m in lines)
    generated = sum(float(m[mk.ROLLOUT_GENERATED_TOKENS_PER_SECOND]) * float(m[mk.ROLLOUT_COLLECT_SECONDS]) for m in lines)
    eff = None
    if trained and all(mk.TRAIN_PADDING_EFFICIENCY in m for m in trained):
        eff = sum(m[mk.TRAIN_TOKENS] for m in trained) / sum(m[mk.TRAIN_TOKENS] / m[mk.TRAIN_PADDING_EFFICIENCY] for m in trained)
    elif trained and all(mk.TRAIN_MAX_ROW_LEN in m and mk.TRAIN_ROWS in m for m in trained):
        eff = sum(m[mk.TRAIN_TOKENS] for m in trained) / sum(m[mk.TRAIN_ROWS] * m[mk.TRAIN_MAX_ROW_LEN] for m in trained)
    wall = summary.get("wall_seconds_this_process", process_seconds)
    return RunStats(
        trajectory_tokens=float(last[mk.COMPUTE_GENERATED_TOKENS]) + float(last[mk.COMPUTE_OBSERVATION_TOKENS]),
        wall_seconds=float(wall), generated_tokens=generated, collect_seconds=collect,
        update_tokens=float(epochs * sum(m[mk.TRAIN_TOKENS] for m in trained)),
        update_seconds=float(sum(m[mk.TRAIN_UPDATE_SECONDS] for m in trained)),
        padding_efficiency=eff, peak_rss_mb=peak_rss_mb, updates=len(lines), process_seconds=process_seconds)


def train_command(algo: str, amount: int, run_dir: Path, cache_dir: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "experiments.train", "experiment=learn_bugfix", f"algo={algo}",
            f"budget.amount={amount}", f"run_dir={run_dir}", "logger=none", "progress=false",
            f"warmstart.cache_dir={cache_dir}", *extra]


def run_tree(tree: Path, algo: str, amount: int, cache_dir: Path, extra: list[str], workdir: Path) -> RunStats:
    """One training run of ``tree`` as a subprocess; its ``RunStats`` (peak RSS from ``os.wait4``)."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"e2e_{algo}_", dir=workdir))
    cmd = train_command(algo, amount, run_dir, cache_dir, extra)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    log = run_dir.with_suffix(".log")
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise RuntimeError(f"run of {tree} ({algo}) failed with exit code {proc.returncode}:\n{tail}")
    lines = read_jsonl(run_dir / "metrics.jsonl")
    summary = json.loads((run_dir / "summary.json").read_text())
    config = (run_dir / "config.yaml").read_text()
    epochs = _yaml_int(config, "algo", "epochs")
    return run_stats(lines, summary, epochs, usage.ru_maxrss / 1024.0, seconds)


def _yaml_int(text: str, section: str, key: str) -> int:
    return int(yaml.safe_load(text)[section][key])


@dataclass
class Table:
    """Medians over repeats per (algo, tree)."""

    runs: dict[tuple[str, str], list[RunStats]] = field(default_factory=dict)

    def add(self, algo: str, tree: str, stats: RunStats) -> None:
        self.runs.setdefault((algo, tree), []).append(stats)

    def median(self, algo: str, tree: str, attr: str) -> float | None:
        vals = [getattr(s, attr) for s in self.runs.get((algo, tree), [])]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    def ratio(self, algo: str, attr: str) -> float | None:
        """Median over repeats of the paired ratio current_i / baseline_i (repeat i of both trees
        ran back to back, so a load change on the machine hits both of a pair alike)."""
        pairs = zip(self.runs.get((algo, "current"), []), self.runs.get((algo, "baseline"), []))
        vals = [getattr(c, attr) / getattr(b, attr) for c, b in pairs
                if getattr(c, attr) is not None and getattr(b, attr) not in (None, 0)]
        return statistics.median(vals) if vals else None


ROWS = [("trajectory tok/s", "trajectory_tok_s", "{:.0f}"), ("gen tok/s (rollout)", "gen_tok_s", "{:.0f}"),
        ("update tok/s", "update_tok_s", "{:.0f}"), ("padding efficiency", "padding_efficiency", "{:.3f}"),
        ("peak RSS MB", "peak_rss_mb", "{:.0f}"), ("run wall s", "wall_seconds", "{:.1f}"),
        ("update s (sum)", "update_seconds", "{:.1f}"), ("collect s (sum)", "collect_seconds", "{:.1f}")]


def format_table(table: Table, algos: list[str], repeats: int, amount: int) -> str:
    """The side-by-side table: per method, current / baseline and their ratio (medians)."""
    def fmt(spec: str, v: float | None) -> str:
        return "-" if v is None else spec.format(v)

    header = f"{'metric':<22}" + "".join(f"{a + ' base':>12}{a + ' now':>12}{'ratio':>8}" for a in algos)
    lines = [f"e2e: experiment=learn_bugfix budget.amount={amount}, median of {repeats} repeat(s), "
             f"1 torch thread; ratio = median of the paired (back-to-back) current / baseline ratios",
             header, "-" * len(header)]
    for label, attr, spec in ROWS:
        row = f"{label:<22}"
        for a in algos:
            b, c = table.median(a, "baseline", attr), table.median(a, "current", attr)
            r = table.ratio(a, attr)
            ratio = "-" if r is None else f"{r:.2f}x"
            row += f"{fmt(spec, b):>12}{fmt(spec, c):>12}{ratio:>8}"
        lines.append(row)
    return "\n".join(lines)


def format_targets(table: Table, algos: list[str], bound: dict[str, dict] | None = None) -> str:
    """One line per target and method: the measured median (ratio to the baseline for throughputs)
    against ``TARGETS``, with ``ok`` / ``MISS`` (``-`` when not measured)."""
    ratio = table.ratio

    checks = [("trajectory tok/s vs baseline", lambda a: ratio(a, "trajectory_tok_s"), TARGETS["trajectory_tok_s"], ">=", "x"),
              ("rollout gen tok/s vs baseline", lambda a: ratio(a, "gen_tok_s"), TARGETS["gen_tok_s"], ">=", "x"),
              ("padding efficiency", lambda a: table.median(a, "current", "padding_efficiency"),
               TARGETS["padding_efficiency"], ">=", ""),
              ("update / equal-length bound", lambda a: (bound or {}).get(a, {}).get("bound_fraction"),
               TARGETS["bound_fraction"], ">=", ""),
              ("peak RSS MB", lambda a: table.median(a, "current", "peak_rss_mb"), TARGETS["peak_rss_mb"], "<=", "")]
    lines = ["targets"]
    for label, get, target, op, unit in checks:
        parts = []
        for a in algos:
            v = get(a)
            if v is None:
                parts.append(f"{a} -")
                continue
            ok = v >= target if op == ">=" else v <= target
            parts.append(f"{a} {v:.2f}{unit} {'ok' if ok else 'MISS'}")
        lines.append(f"  {label:<32} {op} {target:g}{unit}: " + ", ".join(parts))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# In-process: the current trainer's update against the equal-length bound
# ---------------------------------------------------------------------------------------------


def equal_length_bound(policy, critic, tokens: int, row_len: int, epochs: int, minibatches: int,
                       lr: float = 3e-4, seed: int = 0) -> float:
    """Tokens/s of ``epochs x minibatches`` optimizer steps (forward + backward of a log-prob
    loss, plus a value loss through ``critic``, + AdamW) on rows of ``row_len`` tokens holding
    ``tokens`` tokens in all (``epochs x tokens`` counted). Works on copies of the models."""
    torch.manual_seed(seed)
    pol = copy.deepcopy(policy).train()
    crit = copy.deepcopy(critic).train() if critic is not None else None
    params = list(pol.parameters()) + (list(crit.parameters()) if crit is not None else [])
    opt = torch.optim.AdamW(params, lr=lr)
    n_rows = max(1, round(tokens / row_len))
    data = torch.randint(4, pol.shape.vocab_size, (n_rows, row_len))
    chunks = data.chunk(minibatches)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for mb in chunks:
            opt.zero_grad(set_to_none=True)
            logits, _ = pol(mb)
            loss = -shift_logprobs(logits, mb).mean()
            if crit is not None:
                loss = loss + crit(mb).pow(2).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
    return epochs * n_rows * row_len / (time.perf_counter() - t0)


def bench_bound(algo: str, cache_dir: Path, extra: list[str], repeats: int) -> dict:
    """One update of the current tree's trainer on a batch of the learn preset (warm-start
    policy) vs ``equal_length_bound`` with the same models; medians over ``repeats``."""
    torch.set_num_threads(1)
    overrides = ["experiment=learn_bugfix", f"algo={algo}", "logger=none", "progress=false",
                 f"warmstart.cache_dir={cache_dir}", *extra]
    c = validate(compose_config(overrides))
    ws = ensure_warmstart(c, verbose=False)
    shape = policy_shape(c, critic=resolve_critic(c))
    per_update = c.algo.tasks_per_update * c.algo.group_size
    engine = train_engine(c, num_envs=min(c.rollout.num_envs, per_update))
    ratios, upd, bnd, effs = [], [], [], []
    for rep in range(repeats):
        policy, critic = build_models(shape, seed=c.policy.init_seed)
        load_policy_weights(policy, ws.path)
        if critic is not None:
            critic.trunk.load_state_dict(policy.trunk.state_dict())
        trainer = make_trainer(c.algo.name, c.algo, policy, critic, None, c.rollout.temperature)
        reqs = make_requests(c.algo.tasks_per_update, c.algo.group_size, seed=rep, split="train", n_task_pool=c.env.train_tasks,
                             rng=torch.Generator().manual_seed(rep))
        trajs = engine.collect(policy, reqs, generator=torch.Generator().manual_seed(rep))
        lengths = [len(s) for t in trajs for s in t.segments]
        tokens = sum(lengths)
        bound = equal_length_bound(policy, critic, tokens, round(tokens / len(lengths)), c.algo.epochs,
                                   c.algo.minibatches, seed=rep)
        m = trainer.update(trajs)
        rate = c.algo.epochs * m[mk.TRAIN_TOKENS] / m[mk.TRAIN_UPDATE_SECONDS]
        upd.append(rate)
        bnd.append(bound)
        ratios.append(rate / bound)
        effs.append(m.get(mk.TRAIN_PADDING_EFFICIENCY, float("nan")))
    engine.close()
    return {"update_tok_s": statistics.median(upd), "bound_tok_s": statistics.median(bnd),
            "bound_fraction": statistics.median(ratios), "padding_efficiency": statistics.median(effs),
            "tokens": tokens, "rows": len(lengths), "mean_len": tokens / len(lengths), "max_len": max(lengths)}


def format_bound(results: dict[str, dict]) -> str:
    lines = ["update vs equal-length bound (this process, current tree; bound = fwd + bwd + AdamW of the same "
             "model(s), same optimizer steps, rows of the batch's mean segment length)",
             f"{'algo':<6}{'rows':>6}{'tokens':>8}{'mean len':>9}{'max len':>8}{'update tok/s':>14}"
             f"{'bound tok/s':>13}{'fraction':>10}{'pad eff':>9}"]
    for algo, r in results.items():
        lines.append(f"{algo:<6}{r['rows']:>6}{r['tokens']:>8}{r['mean_len']:>9.0f}{r['max_len']:>8}"
                     f"{r['update_tok_s']:>14.0f}{r['bound_tok_s']:>13.0f}{r['bound_fraction']:>10.2f}"
                     f"{r['padding_efficiency']:>9.3f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats per (method, tree); median")
    parser.add_argument("--quick", action="store_true", help="1 repeat, 1 update per run: a plumbing check")
    parser.add_argument("--baseline", default=None, help="baseline tree (a checkout of commit 688a06a); required unless --no-baseline")
    parser.add_argument("--algo", action="append", choices=DEFAULT_METHODS, dest="algos",
                        help="method (repeatable; default: the main job's methods, GRPO and PPO)")
    parser.add_argument("--amount", type=int, default=1280, help="budget.amount (rollouts) of each run")
    parser.add_argument("--set", action="append", default=[], dest="extra", metavar="KEY=VALUE",
                        help="extra Hydra override for every run (repeatable)")
    parser.add_argument("--cache-dir", default=str(ROOT / ".cache" / "bench_e2e"),
                        help="root of the per-tree warm start caches")
    parser.add_argument("--no-bound", action="store_true", help="skip the in-process bound measurement")
    parser.add_argument("--no-baseline", action="store_true", help="run the current tree only")


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1 or args.amount < 1:
        raise SystemExit(f"--repeats={args.repeats} and --amount={args.amount} must be >= 1")
    if not args.no_baseline and args.baseline is None:
        raise SystemExit("--baseline DIR is required (a checkout of the baseline commit), or --no-baseline")
    baseline = Path(args.baseline or ".")
    if not args.no_baseline and not (baseline / "experiments" / "train.py").exists():
        raise SystemExit(f"--baseline={baseline} is not a tree with experiments/train.py (use --no-baseline)")
    repeats = 1 if args.quick else args.repeats
    amount = 64 if args.quick else args.amount
    algos = args.algos or list(DEFAULT_METHODS)
    trees = {"current": ROOT} if args.no_baseline else {"baseline": baseline, "current": ROOT}
    cache = Path(args.cache_dir)
    table = Table()
    with tempfile.TemporaryDirectory(prefix="bench_e2e_") as work:
        for rep in range(repeats):
            for algo in algos:
                for name, tree in trees.items():
                    stats = run_tree(tree, algo, amount, cache / name, args.extra, Path(work))
                    table.add(algo, name, stats)
                    print(f"[{rep + 1}/{repeats}] {algo:<4} {name:<8} traj {stats.trajectory_tok_s:8.0f} tok/s  "
                          f"wall {stats.wall_seconds:6.1f} s  update {stats.update_seconds:6.1f} s  "
                          f"collect {stats.collect_seconds:6.1f} s  rss {stats.peak_rss_mb:5.0f} MB", flush=True)
    print(format_table(table, algos, repeats, amount))
    results = None
    if not args.no_bound:
        results = {a: bench_bound(a, cache / "current", args.extra, repeats) for a in algos}
        print(format_bound(results))
    print(format_targets(table, algos, results))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks e2e", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
