"""Process-reward measurement: real trainers farm a biased process reward (C24, trainer part; the
scripted-agent part is an env measurement): GRPO under the outcome and the biased reward, and
process-supervised GRPO (``algo=grpo_process``, DeepSeekMath 4.1.3: the step rewards themselves are
the advantage signal) under the biased reward, all at the same budget from the same start model."""

from __future__ import annotations

from functools import lru_cache

from algos.registry import trainer_traits
from experiments.claims.common import start_model_info, train_run
from experiments.claims.compare import C19_ALGOS

C24_BUDGET = 512  # 32 updates of 16 rollouts: the biased reward is farmed by then (1024 gave the same verdict)
C24_BIASED = "biased_process"  # pays 0.1 per test run, whatever the progress
#: The run keys of :func:`reward_mode_runs`: (name, algorithm, reward mode).
C24_RUNS = (("outcome", "grpo", "outcome"), ("biased", "grpo", C24_BIASED), ("process_biased", "grpo_process", C24_BIASED))


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


def measure_c24_trainer(budget: int = C24_BUDGET, seed: int = 0) -> dict:
    """Training reward vs verified success of GRPO under ``outcome`` and biased process reward, and
    of ``grpo_process`` under the biased process reward.

    Three ``experiments.runtime.loop.run`` runs (:func:`reward_mode_runs`). Per run (``outcome``,
    ``biased``: GRPO; ``process_biased``: grpo_process, with its ``algo`` and ``mode``): ``updates``; the first- and last-quarter means of the training reward
    (``reward_first``, ``reward_last``: ``rollout/train_reward_mean``) and of the verified success
    (``success_first``, ``success_last``: ``rollout/success_rate``, the env's independent verifier);
    ``turns_last`` (last-quarter ``rollout/mean_turns``); ``eval_train_success`` (final verified
    success on the train templates, 8 tasks x 8); ``scored_step_frac`` for grpo_process (mean
    ``train/scored_step_frac``: share of its steps that carry a reward). Also ``budget``, ``seed`` and
    ``biased_mode``."""
    runs = reward_mode_runs(budget, seed)
    out: dict = {"budget": budget, "seed": seed, "biased_mode": C24_BIASED}
    for name, algo, mode in C24_RUNS:
        rows = runs[name]["metrics"]
        r0, r1 = quarter_means(rows, "rollout/train_reward_mean")
        s0, s1 = quarter_means(rows, "rollout/success_rate")
        out[name] = {"updates": len(rows), "reward_first": r0, "reward_last": r1, "success_first": s0,
                     "success_last": s1, "turns_last": quarter_means(rows, "rollout/mean_turns")[1],
                     "eval_train_success": runs[name]["summary"]["eval_train/success"]}
        if trainer_traits(algo).step_rewards:
            fracs = [r["train/scored_step_frac"] for r in rows if r.get("train/scored_step_frac") is not None]
            out[name].update(algo=algo, mode=mode, scored_step_frac=sum(fracs) / len(fracs) if fracs else float("nan"))
    return out
