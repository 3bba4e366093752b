"""The one training loop of a run (what ``python -m experiments.train algo=grpo env=bugfix`` runs),
for one agent and for two.

:func:`run` drives a learner (``experiments.runtime.learner.Learner``): the one-agent
``experiments.runtime.one_agent.OneAgentLearner``, or for a two-agent env (``env=pairfix`` with
``algo=ppo_ctde | ppo_independent``) ``experiments.runtime.pair.TwoAgentLearner`` (per-agent
metrics ``agent_a/...``, ``agent_b/...``). It reads in order: build (run directory, learner: start
model, models, trainers, rollout engines; resume when a checkpoint exists; logger), then the loop
{collect, update, log, maybe evaluate, save} until the compute budget (``algos.compute.Budget``)
is spent or ``budget.max_updates`` is reached, then the summary. Both kinds of run share the run
directory, resume, SIGTERM, progress bar, logger and summary code. The config is
validated before any of it (``experiments.runtime.config.validate``; experiments/train.py prints a
one-line ``config error: ...`` and exits with code 2).

Run directory (``experiments/runtime/rundir.py``): ``config.yaml``, ``metrics.jsonl`` (one dict per update,
fsynced), ``summary.json``, ``checkpoints/last.pt``, ``wandb/``; by default
``runs/<algo>-<env>-<hash of the config>`` so the same command always maps to the same directory.

Resume: every update ends with an atomic checkpoint (the learner's ``state_dict``: models,
optimizers, ComputeMeter, behaviour policy snapshots or the start evaluation; the update index,
last evaluation, the byte length of metrics.jsonl). Re-running the
same command (after Ctrl-C, SIGTERM or kill -9) loads it, truncates metrics.jsonl to that length and
continues; all randomness is derived from (seed, update index, stream), so the final metrics equal
an uninterrupted run's (wall-clock fields aside).

Learning rate: ``learner.set_budget_fraction(f)`` with ``f`` the fraction of the budget spent
BEFORE the update's rollouts are collected, so under ``lr_schedule=linear`` update ``k`` of a
rollout budget ``B`` at ``n`` rollouts per update runs at ``lr * (1 - k n / B)`` and the last one
at ``lr * n / B > 0``.

Test aid (not a config field): with the environment variable ``AGENTRL_TEST_KILL_AFTER_UPDATE=N``
the process SIGKILLs itself after update N's metrics line is written, before its checkpoint (the
kill -9 resume test uses it; re-running without the variable redoes update N).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import torch
from tqdm import tqdm

from algos import metric_keys as mk
from algos.compute import Budget
from experiments.runfiles.transcripts import FILE_NAME as TRANSCRIPTS_FILE
from experiments.runfiles.transcripts import TABLE_COLUMNS, load_transcripts, transcript_rows
from experiments.runtime.learner import Learner
from experiments.runtime.loggers import make_logger
from experiments.runtime.memory import release_freed_memory
from experiments.runtime.one_agent import OneAgentLearner
from experiments.runtime.pair import TwoAgentLearner
from experiments.runtime.rundir import RunDir, jsonable
from experiments.runtime.schema import TrainConfig, is_pair_run

KILL_AFTER_UPDATE_ENV = "AGENTRL_TEST_KILL_AFTER_UPDATE"


def _progress(c: TrainConfig, spent: float):
    return tqdm(total=float(c.budget.amount), initial=min(spent, c.budget.amount), disable=not c.progress,
                desc=f"{c.algo.name}/{c.env.name}", unit=c.budget.kind, dynamic_ncols=True)


def kill_if_test_asks(update: int) -> None:
    """Test aid, not a config field: SIGKILL this process after update ``update``'s metrics line
    when the environment variable ``AGENTRL_TEST_KILL_AFTER_UPDATE`` equals ``update`` (the kill -9
    resume test sets it; without the variable this does nothing)."""
    if update == int(os.environ.get(KILL_AFTER_UPDATE_ENV, "0")):
        os.kill(os.getpid(), signal.SIGKILL)  # between the metrics line and its checkpoint


class SigtermStop:
    """SIGTERM stops a run like Ctrl-C (``KeyboardInterrupt``), except inside :meth:`deferred`: a
    SIGTERM that arrives while an update's metrics line and checkpoint are written stops the run
    right after them, so the checkpoint on disk is always whole."""

    def __init__(self) -> None:
        self.deferring = False
        self.pending = False

    def handler(self, signum, frame) -> None:
        if self.deferring:
            self.pending = True
        else:
            raise KeyboardInterrupt

    @contextmanager
    def deferred(self):
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False
        if self.pending:
            raise KeyboardInterrupt


def make_learner(c: TrainConfig, rd: RunDir) -> Learner:
    """The learner of a validated config: two agents for a pair env, else one."""
    return TwoAgentLearner(c) if is_pair_run(c) else OneAgentLearner(c, rd.path)


@dataclass
class RunState:
    """What the loop carries from one update to the next (and what a checkpoint restores)."""

    update: int = 0
    last_eval: dict = field(default_factory=dict)
    done: bool = False


def run(c: TrainConfig, resolved: dict | None = None) -> dict:
    """Run (or resume) one training run of a validated config; returns the summary dict."""
    # ================================================================ build
    torch.set_num_threads(max(1, c.threads))
    rd = RunDir.create(c)
    rd.write_config(resolved if resolved is not None else asdict(c))
    learner = make_learner(c, rd)
    meter, budget = learner.meter, Budget(c.budget.kind, c.budget.amount)
    st = RunState()
    state = rd.resume() if c.resume else rd.start_fresh()
    if state:
        learner.load_state_dict(state)
        st = RunState(state["update"], state["last_eval"], state["done"])
        print(f"resumed {rd.path} at update {st.update}", file=sys.stderr)
    start_info = learner.start_info()
    logger = make_logger(c.logger.kind, run_dir=rd.path, name=c.logger.name or rd.path.name, group=c.logger.group or None,
                         job_type=c.algo.name, config={**(resolved or asdict(c)), "start_model": start_info})
    logger.define_x_axes()
    sigterm = SigtermStop()
    signal.signal(signal.SIGTERM, sigterm.handler)
    pbar, t_run, wall_start = _progress(c, budget.spent(meter)), time.perf_counter(), meter.wall_seconds
    try:
        while not st.done and not budget.exhausted(meter) and st.update < c.budget.max_updates:
            lr, metrics = _one_update(c, learner, budget, st)
            with sigterm.deferred():
                rd.append_metrics(metrics)
                logger.log(jsonable(metrics))
                kill_if_test_asks(st.update)
                # ======================================================== save
                rd.save_checkpoint({**learner.state_dict(), "update": st.update, "last_eval": st.last_eval,
                                    "done": st.done})
            pbar.n = min(budget.spent(meter), float(c.budget.amount))
            pbar.set_postfix(upd=st.update, succ=f"{metrics['rollout/success_rate']:.2f}",
                             eval=f"{st.last_eval.get('eval/success', float('nan')):.2f}",
                             s=f"{time.perf_counter() - t_run:.0f}", lr=f"{lr:.1e}")
    except KeyboardInterrupt:
        pbar.close()
        logger.finish()
        print(f"interrupted at update {st.update}; re-run the same command to resume from {rd.checkpoint_path}",
              file=sys.stderr)
        raise SystemExit(130)
    pbar.close()
    summary = _finish(c, rd, learner, logger, st, start_info, t_run, wall_start)
    del learner
    release_freed_memory()  # a joblib worker's next sweep job starts from what is still live
    return summary


def _one_update(c: TrainConfig, learner: Learner, budget: Budget, st: RunState) -> tuple[float, dict]:
    """Collect, update, maybe evaluate: advances ``st`` and returns ``(lr, the update's metrics line)``."""
    meter = learner.meter
    # ================================================================ collect
    t_update = time.perf_counter()
    lr = learner.set_budget_fraction(budget.fraction(meter))  # budget spent before this update
    batch = learner.collect(st.update)
    # ================================================================ update
    learner_metrics = learner.update(batch)
    st.update += 1
    meter.updates = st.update
    meter.wall_seconds += time.perf_counter() - t_update
    # ================================================================ log, maybe evaluate
    metrics = {"update": st.update, "algo": c.algo.name, **learner_metrics}
    if learner.counters_before_eval:
        metrics.update(meter.metrics())
    st.done = budget.exhausted(meter) or st.update >= c.budget.max_updates
    if st.done or (c.eval.every and st.update % c.eval.every == 0):
        st.last_eval = learner.evaluate(final=st.done)
        metrics.update(st.last_eval)
    if not learner.counters_before_eval:
        metrics.update(meter.metrics())
    metrics[mk.COMPUTE_BUDGET_FRACTION] = budget.fraction(meter)
    return lr, metrics


def _finish(c: TrainConfig, rd: RunDir, learner: Learner, logger, st: RunState, start_info: dict, t_run: float,
            wall_start: float) -> dict:
    """The summary: the final evaluation (made now when the loop never evaluated), totals, logs."""
    # ================================================================ summary
    meter = learner.meter
    last_eval = st.last_eval or learner.evaluate(final=True)
    learner.close()
    summary = {**last_eval, **meter.metrics(), **start_info, "run_dir": str(rd.path), "algo": c.algo.name,
               "env": c.env.name, "updates": st.update, "seed": c.seed, mk.BUDGET_KIND: c.budget.kind,
               mk.BUDGET_AMOUNT: c.budget.amount, **learner.summary_extra(),
               "wall_seconds_this_process": time.perf_counter() - t_run, "wall_seconds_updates": meter.wall_seconds - wall_start}
    rd.write_summary(summary)
    # with the compute counters, so the final evaluation sits on every x-axis too
    logger.log({k: v for k, v in jsonable(summary).items()
                if k.startswith((mk.EVAL, mk.AGENT, mk.START_MODEL_SUCCESS, mk.COMPUTE))})
    if (rd.path / TRANSCRIPTS_FILE).exists():
        logger.log_table(mk.EVAL_TRANSCRIPTS, list(TABLE_COLUMNS), transcript_rows(load_transcripts(rd.path), c.algo.name))
    logger.finish()
    print(json.dumps({k: summary[k] for k in (mk.EVAL_SUCCESS, mk.START_MODEL_SUCCESS, mk.COMPUTE_ROLLOUTS, "updates", "run_dir")}),
          file=sys.stderr)
    return summary


__all__ = ["KILL_AFTER_UPDATE_ENV", "kill_if_test_asks", "make_learner", "run"]
