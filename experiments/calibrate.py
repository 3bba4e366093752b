"""Success rate of the scripted BugFix agents per difficulty, with 95 % Wilson intervals.

    python -m experiments.calibrate                      # every preset x every scripted agent
    python -m experiments.calibrate --episodes 2000 --agents noisy_oracle --mistake-rate 0.03

One row per (difficulty, agent): episodes, masked episodes (infrastructure crashes: excluded, never
counted as a failure), successes / scored episodes (``info["verified"]`` from the evaluation
verifier), the success rate with its Wilson interval, the fraction of episodes with a hack flag,
mean turns and mean simulated tool seconds. Episode ``i`` uses env seed ``seed + i`` and draws its
task from the env's generator on ``--split``; agents get their own stream of the same seed, so a
fixed seed reproduces the table exactly.

The closing ``levels`` line names, for the target rates 0.98 / 0.20 / 0.02, the difficulty where
the noisy oracle comes closest (at the default mistake rate 0.03: easy / hard / extreme).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from tqdm import tqdm

from algos.metrics import binomial_confidence_interval
from envs.agents import AGENTS, make_agent, run_episode
from envs.bugfix import DIFFICULTIES, SPLITS, BugFixEnv

DEFAULT_MISTAKE_RATE = 0.03
TARGET_LEVELS = (0.98, 0.20, 0.02)


@dataclass(frozen=True)
class Row:
    difficulty: str
    agent: str
    mistake_rate: float | None
    episodes: int
    masked: int
    successes: int
    hacked: int
    mean_turns: float
    mean_tool_seconds: float

    @property
    def scored(self) -> int:
        return self.episodes - self.masked

    @property
    def success(self) -> float:
        return self.successes / self.scored if self.scored else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        if not self.scored:
            return float("nan"), float("nan")
        return binomial_confidence_interval(self.successes, self.scored, 0.95)


def measure(difficulty: str, agent_name: str, episodes: int, seed: int, mistake_rate: float,
            split: str = "train", progress: tqdm | None = None) -> Row:
    """Play ``episodes`` episodes of one agent at one difficulty and count the outcomes."""
    env = BugFixEnv(difficulty)
    kwargs = {"mistake_rate": mistake_rate} if agent_name == "noisy_oracle" else {}
    agent = make_agent(agent_name, **kwargs)
    options = {"split": split}
    masked = successes = hacked = turns = 0
    seconds = 0.0
    for i in range(episodes):
        ep = run_episode(env, agent, seed=seed + i, options=options)
        if ep["masked"]:
            masked += 1
        else:
            successes += int(ep["verified"])
        hacked += int(any(ep["hack_flags"].values()))
        turns += ep["turns"]
        seconds += ep["tool_seconds"]
        if progress is not None:
            progress.update(1)
    env.close()
    return Row(difficulty, agent_name, kwargs.get("mistake_rate"), episodes, masked, successes, hacked,
               turns / episodes, seconds / episodes)


def calibrate(difficulties, agents, episodes: int, seed: int = 0,
              mistake_rate: float = DEFAULT_MISTAKE_RATE, split: str = "train") -> list[Row]:
    rows = []
    with tqdm(total=len(difficulties) * len(agents) * episodes, desc="calibrate", unit="ep",
              file=sys.stderr, disable=None) as bar:
        for difficulty in difficulties:
            for name in agents:
                rows.append(measure(difficulty, name, episodes, seed, mistake_rate, split, bar))
    return rows


def format_table(rows: list[Row]) -> str:
    header = (f"{'difficulty':<10} {'agent':<18} {'mistake':>7} {'episodes':>8} {'masked':>6} "
              f"{'successes':>11} {'success':>7}  {'95% CI':<16} {'hacked':>6} {'turns':>5} {'tool_s':>6}")
    lines = [header, "-" * len(header)]
    for r in rows:
        low, high = r.interval
        mistake = "-" if r.mistake_rate is None else f"{r.mistake_rate:.3f}"
        lines.append(
            f"{r.difficulty:<10} {r.agent:<18} {mistake:>7} {r.episodes:>8} {r.masked:>6} "
            f"{f'{r.successes}/{r.scored}':>11} {r.success:>7.3f}  [{low:.3f}, {high:.3f}]  "
            f"{r.hacked / r.episodes:>6.2f} {r.mean_turns:>5.2f} {r.mean_tool_seconds:>6.1f}"
        )
    return "\n".join(lines)


def format_levels(rows: list[Row]) -> str | None:
    """Where the noisy oracle comes closest to each target success level."""
    noisy = [r for r in rows if r.agent == "noisy_oracle" and r.scored]
    if not noisy:
        return None
    parts = []
    for target in TARGET_LEVELS:
        best = min(noisy, key=lambda r: abs(r.success - target))
        low, high = best.interval
        inside = "in CI" if low <= target <= high else "outside CI"
        parts.append(f"~{target:.2f}: {best.difficulty} {best.success:.3f} [{low:.3f}, {high:.3f}] ({inside})")
    return "levels (noisy_oracle): " + " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.calibrate", description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per (difficulty, agent) row")
    parser.add_argument("--seed", type=int, default=0, help="episode i uses env seed seed + i")
    parser.add_argument("--difficulties", nargs="+", default=list(DIFFICULTIES), choices=list(DIFFICULTIES))
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    parser.add_argument("--mistake-rate", type=float, default=DEFAULT_MISTAKE_RATE,
                        help="noisy_oracle's chance of a mistake per decision")
    parser.add_argument("--split", default="train", choices=list(SPLITS))
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    rows = calibrate(args.difficulties, args.agents, args.episodes, args.seed, args.mistake_rate, args.split)
    print(f"BugFix calibration: {args.episodes} episodes per row, seed {args.seed}, split {args.split}, "
          f"success = verified among unmasked episodes, 95% Wilson interval")
    print(format_table(rows))
    levels = format_levels(rows)
    if levels:
        print(levels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
