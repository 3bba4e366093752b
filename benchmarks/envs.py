"""``python -m benchmarks envs``: env steps per second next to Gymnasium's FrozenLake-v1.

    python -m benchmarks envs [--steps 20000] [--repeats 5] [--env agentrl/BugFix-v2 ...]

``envs``: steps per second of every registered env id (``envs.ENV_IDS``, or the ``--env`` ones)
next to Gymnasium's ``FrozenLake-v1``, both built with ``gymnasium.make`` (env checker off for
both), and the ratio ``env seconds per step / FrozenLake seconds per step`` (the median over
``--repeats`` interleaved repeats). Actions come from a per-env driver (:func:`driver_of`), recorded
before timing so only ``reset`` + ``step`` are timed: an env whose spec has scripted agents
replays its noisy-oracle episodes (for BugFix a mix of views, edits, undos, test runs, submits and
faults); any other env gets random vocabulary word strings. FrozenLake takes random actions.
Target: the spec's ``step_cost_target`` (BugFix-v2 <= 8x FrozenLake).
Any env that fails to build is an error (non-zero exit); use ``--env`` to bench a subset.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import gymnasium
import numpy as np

import envs
from envs.episode import run_episode
from envs.tokenizer import get_tokenizer

BASELINE_ID = "FrozenLake-v1"
#: the mistake rate of the noisy-oracle driver
DRIVER_MISTAKE_RATE = 0.2

# An episode to replay: (seed, reset options, actions). A driver records episodes worth ~n steps.
Episode = tuple[int, dict | None, list[str]]
Driver = Callable[[gymnasium.Env, int, int], list[Episode]]


def play(env: gymnasium.Env, agent, n_steps: int, seed: int) -> list[Episode]:
    """Record episodes of ``agent`` (the agents' protocol: ``reset(env, seed)`` after
    ``env.reset``, then ``act(observation, info)``) until ~``n_steps`` actions."""
    out, total, i = [], 0, 0
    while total < n_steps:
        actions = run_episode(env, agent, seed=seed + i).actions  # the one scripted episode loop
        out.append((seed + i, None, actions))
        total += len(actions)
        i += 1
    return out


def noisy_oracle_driver(env: gymnasium.Env, n_steps: int, seed: int) -> list[Episode]:
    """Episodes of the env spec's scripted ``noisy_oracle`` (mistake rate 0.2; on BugFix views,
    edits, undos, test runs, submits, faults)."""
    agent = envs.scripted_agent(env.spec.id, "noisy_oracle", mistake_rate=DRIVER_MISTAKE_RATE)
    return play(env, agent, n_steps, seed)


def random_words_driver(env: gymnasium.Env, n_steps: int, seed: int) -> list[Episode]:
    """Fallback for envs without a driver: 1-4 random vocabulary words per action."""
    words = [w for w in get_tokenizer().id_to_token if not w.startswith("<")]
    rng = np.random.default_rng(seed)
    per_episode = 50
    out = []
    for i in range(max(1, n_steps // per_episode)):
        actions = [" ".join(words[j] for j in rng.integers(len(words), size=int(rng.integers(1, 5))))
                   for _ in range(per_episode)]
        out.append((seed + i, None, actions))
    return out


def driver_of(env_id: str) -> Driver:
    """The driver of ``env_id``: :func:`noisy_oracle_driver` when its spec has scripted agents,
    else :func:`random_words_driver`."""
    return noisy_oracle_driver if envs.spec_of(env_id).scripted_agents is not None else random_words_driver


def time_env(env: gymnasium.Env, episodes: list[Episode], n_steps: int) -> tuple[int, float]:
    """(steps, seconds) replaying ``episodes`` (cycled) until ``n_steps`` steps; resets included."""
    steps = 0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        while steps < n_steps:
            for seed, options, actions in episodes:
                env.reset(seed=seed, options=options)
                for action in actions:
                    _, _, terminated, truncated, _ = env.step(action)
                    steps += 1
                    if terminated or truncated:
                        break
                if steps >= n_steps:
                    break
        return steps, time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()


def frozenlake_episodes(n_steps: int, seed: int) -> list[Episode]:
    rng = np.random.default_rng(seed)
    return [(seed + i, None, rng.integers(4, size=100).tolist()) for i in range(max(1, n_steps // 20))]


@dataclass
class EnvBench:
    env_id: str
    driver: str
    steps_per_second: float
    baseline_steps_per_second: float
    ratio: float


def bench_envs(env_ids, n_steps: int, repeats: int, seed: int = 0) -> list[EnvBench]:
    baseline = gymnasium.make(BASELINE_ID, disable_env_checker=True)
    base_eps = frozenlake_episodes(n_steps, seed)
    results = []
    for env_id in env_ids:
        env = envs.make(env_id)  # errors propagate: a broken env is a failed benchmark
        driver = driver_of(env_id)
        episodes = driver(env, n_steps, seed)
        time_env(env, episodes, min(n_steps, 1000))  # warm-up (task catalogue, caches)
        time_env(baseline, base_eps, min(n_steps, 1000))
        ratios, rates, base_rates = [], [], []
        for _ in range(repeats):
            b_steps, b_sec = time_env(baseline, base_eps, n_steps)
            e_steps, e_sec = time_env(env, episodes, n_steps)
            rates.append(e_steps / e_sec)
            base_rates.append(b_steps / b_sec)
            ratios.append((e_sec / e_steps) / (b_sec / b_steps))
        env.close()
        results.append(EnvBench(env_id, driver.__name__, statistics.median(rates),
                                statistics.median(base_rates), statistics.median(ratios)))
    baseline.close()
    return results


def format_env_bench(results: list[EnvBench], n_steps: int, repeats: int) -> str:
    header = f"{'env':<24} {'driver':<20} {'steps/s':>10} {BASELINE_ID + ' steps/s':>22} {'ratio':>7}  target"
    lines = [f"env step cost vs {BASELINE_ID}: {n_steps} steps x {repeats} repeats, "
             f"ratio = (env s/step) / ({BASELINE_ID} s/step), median over repeats", header, "-" * len(header)]
    for r in results:
        target = envs.spec_of(r.env_id).step_cost_target
        verdict = "-" if target is None else f"<= {target:g}x {'ok' if r.ratio <= target else 'OVER'}"
        lines.append(f"{r.env_id:<24} {r.driver:<20} {r.steps_per_second:>10.0f} "
                     f"{r.baseline_steps_per_second:>22.0f} {r.ratio:>6.2f}x  {verdict}")
    return "\n".join(lines)


def add_envs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=20_000, help="timed steps per env per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env", action="append", choices=list(envs.ENV_IDS), dest="env_ids",
                        help="bench only this env id (repeatable; default: every registered id)")


def run_envs(args: argparse.Namespace) -> int:
    if args.steps < 1 or args.repeats < 1:
        raise SystemExit("--steps and --repeats must be >= 1")
    env_ids = args.env_ids or list(envs.ENV_IDS)
    results = bench_envs(env_ids, args.steps, args.repeats, args.seed)
    print(format_env_bench(results, args.steps, args.repeats))
    return 0
