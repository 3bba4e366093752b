"""The ablation report: a method's full recipe against variants that each remove one part of it
(a Hydra override such as ``algo.critic_lam=null``), one sweep directory per recipe.

    python -m experiments.report.ablation --method ppo_long --full SWEEP_DIR \\
        --variant NAME=SWEEP_DIR[@METHOD] [--variant ...] [--out OUT_PATH]

Each directory is searched recursively for run directories (:func:`experiments.report.load.load_runs`);
only the runs of ``--method`` count, or in a variant's directory those of its ``@METHOD``: a
registered variant of the method run with the method's settings, e.g. ``ppo_segment_terminal``
with ``ppo_long``'s ``algo.*`` values (its row then lists ``algo.name`` among what changed). A
variant's sweep, e.g.
``python -m experiments.compare --preset horizon --horizons 64 --methods ppo_long --seeds 0,1
--sweep-dir DIR -- algo.critic_lam=null``, puts them under ``DIR/n64``.

One row per recipe: the ``algo.*`` config keys whose values differ from the full recipe's (read
from the runs' config.yaml, ``key=value``); the seeds; the final held-out success
(``summary.json`` ``eval/success``, as in the compare report's final table), mean and 95 %
Student-t interval over seeds; ``variant - full`` with the Welch 95 % interval and the
Conclusion's verdict rule (``ahead`` / ``behind`` / ``inconclusive``); the critic's held-out
explained variance (second-half mean per run, then mean ± t-interval over runs); training wall
seconds. Errors (exit 2, one ``report: ...`` line): a directory without runs of ``--method``
(names the methods found), two runs of one seed in a directory, runs of one directory that
disagree on a config key, and a variant whose config differs from the full recipe's outside
``algo.*`` and the run bookkeeping keys of :data:`BOOKKEEPING_KEYS` (another env, budget or
evaluation is not an ablation).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from algos import metric_keys as mk
from experiments.report.keys import CRITIC_EV_KEY, METHODS_WITH_CRITIC, ReportError
from experiments.report.load import Run, group_runs, load_runs
from experiments.report.stats import fmt_seeds, mean_ci, t_critical, verdict, welch_interval
from experiments.report.tables import second_half_mean, summary_values

SUCCESS_KEY = mk.EVAL_SUCCESS
WALL_KEY = mk.COMPUTE_WALL_SECONDS
ABLATED_PREFIX = "algo."
#: Config keys (and key prefixes) that name or place a run rather than define its recipe.
BOOKKEEPING_KEYS = ("seed", "run_dir", "runs_root", "resume", "progress", "threads", "logger", "warmstart.cache_dir")
ABSENT = "<absent>"
#: Config keys added after runs were recorded, each with the value that reproduces the runs made
#: before it (its schema default, tested): a run whose config.yaml lacks the key ran with it.
ADDED_KEYS: dict[str, Any] = {"policy.env_instructions": False, "algo.lam_q": None}
COLUMNS = ("recipe", "what changed", "seeds", "final held-out success, mean [95% CI]",
           "minus full recipe [95% Welch]", "verdict", "critic EV held-out (2nd-half mean)", "wall s (training)")


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a.b": value}`` for every leaf of a nested config (an empty mapping is a leaf)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_config(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def is_bookkeeping(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in BOOKKEEPING_KEYS)


def recipe_config(run: Run) -> dict[str, Any]:
    """The run's flattened config without :data:`BOOKKEEPING_KEYS`; a key of :data:`ADDED_KEYS` its
    config.yaml lacks takes the value runs made before that key ran with."""
    return {k: v for k, v in {**ADDED_KEYS, **flat_config(run.config)}.items() if not is_bookkeeping(k)}


def config_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(key, value in a, value in b)`` for every key whose values differ (:data:`ABSENT` when missing)."""
    return [(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in sorted(a.keys() | b.keys())
            if a.get(k, ABSENT) != b.get(k, ABSENT)]


@dataclass(frozen=True)
class Recipe:
    """One sweep directory's runs of the method (seed order) and the config they all share."""

    name: str
    sweep_dir: Path
    runs: tuple[Run, ...]
    config: dict[str, Any]

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(r.seed for r in self.runs)

    @property
    def success(self) -> list[Any]:
        """Final held-out success per seed."""
        return summary_values(self.runs, SUCCESS_KEY)


def load_recipe(name: str, sweep_dir: str | Path, method: str) -> Recipe:
    """The runs of ``method`` under ``sweep_dir``; :class:`ReportError` when there is none, when two
    share a seed or when they disagree on a config key outside :data:`BOOKKEEPING_KEYS`."""
    groups = group_runs(load_runs(sweep_dir))
    runs = sorted((r for by_method in groups.values() for r in by_method.get(method, ())), key=lambda r: r.seed)
    if not runs:
        found = sorted({m for by_method in groups.values() for m in by_method})
        raise ReportError(f"no runs of {method} under {sweep_dir}; methods found: {', '.join(found)}")
    where = {id(r): r.run_dir.relative_to(sweep_dir) for r in runs}
    for a, b in zip(runs, runs[1:]):
        if a.seed == b.seed:
            raise ReportError(f"two runs of {method} with seed {a.seed} under {sweep_dir}: "
                              f"{where[id(a)]} and {where[id(b)]}")
    config = recipe_config(runs[0])
    for run in runs[1:]:
        differences = config_differences(config, recipe_config(run))
        if differences:
            key, ours, theirs = differences[0]
            raise ReportError(f"the {method} runs under {sweep_dir} are not one recipe: {key}={ours} in "
                              f"{where[id(runs[0])]}, {key}={theirs} in {where[id(run)]}")
    return Recipe(name, Path(sweep_dir), tuple(runs), config)


def what_changed(full: Recipe, variant: Recipe) -> tuple[str, ...]:
    """``key=value`` (the variant's value) for each ``algo.*`` key that differs from the full recipe;
    :class:`ReportError` on the first difference outside ``algo.*``."""
    changed = []
    for key, ours, theirs in config_differences(full.config, variant.config):
        if not key.startswith(ABLATED_PREFIX):
            raise ReportError(f"variant {variant.name} is not an ablation of the full recipe: {key}={theirs} under "
                              f"{variant.sweep_dir}, {key}={ours} under {full.sweep_dir} (only algo.* keys may differ)")
        changed.append(f"{key}={theirs}")
    return tuple(changed)


def ablation_verdict(low: float, high: float) -> str:
    """The Conclusion's rule (:func:`experiments.report.stats.verdict`) for ``variant - full``, in
    one word: ``ahead`` (interval above 0), ``behind`` (below 0) or ``inconclusive``."""
    word = verdict(low, high, "full", "variant")
    return {"VARIANT ahead": "ahead", "FULL ahead": "behind"}.get(word, word)


def _interval(mean: float, low: float, high: float) -> str:
    if not math.isfinite(mean):
        return "n/a"
    bounds = "n/a (< 2 seeds)" if not math.isfinite(low) else f"{low:.3f}, {high:.3f}"
    return f"{mean:.3f} [{bounds}]"


@dataclass(frozen=True)
class AblationRow:
    """One recipe's numbers; ``difference`` / ``low`` / ``high``: ``variant - full`` and its Welch
    interval (NaN for the full recipe itself)."""

    name: str
    changed: tuple[str, ...]
    seeds: tuple[int, ...]
    success: float
    success_low: float
    success_high: float
    difference: float
    low: float
    high: float
    critic_ev: str
    wall_seconds: str
    is_full: bool = False

    @property
    def verdict(self) -> str:
        return "reference" if self.is_full else ablation_verdict(self.low, self.high)

    def cells(self) -> list[str]:
        changed = ("(full recipe)" if self.is_full
                   else ", ".join(f"`{c}`" for c in self.changed) or "nothing (same config)")
        if self.is_full:
            diff = "-"
        else:
            diff = f"{self.difference:+.3f}" + ("" if not math.isfinite(self.low)
                                                 else f" [{self.low:+.3f}, {self.high:+.3f}]")
        seeds = f"{len(self.seeds)} ({', '.join(map(str, self.seeds))})"
        return [self.name, changed, seeds, _interval(self.success, self.success_low, self.success_high),
                diff, self.verdict, self.critic_ev, self.wall_seconds]


def ablation_row(full: Recipe, recipe: Recipe, method: str) -> AblationRow:
    """``recipe``'s row, compared with ``full`` (the full recipe's own row when they are the same object)."""
    mean, half = mean_ci(recipe.success)
    d, low, high, _ = welch_interval(full.success, recipe.success)
    critic = (fmt_seeds([second_half_mean(r, CRITIC_EV_KEY) for r in recipe.runs]) if method in METHODS_WITH_CRITIC
              else "n/a (no critic)")
    is_full = recipe is full
    return AblationRow(recipe.name, () if is_full else what_changed(full, recipe), recipe.seeds,
                       mean, mean - half, mean + half, d, low, high, critic,
                       fmt_seeds(summary_values(recipe.runs, WALL_KEY)), is_full)


def seeds_note(rows: Sequence[AblationRow]) -> str:
    """The line under the table: seeds per recipe and what few seeds do to the intervals."""
    counts = ", ".join(f"{r.name} {len(r.seeds)}" for r in rows)
    note = f"Seeds per recipe: {counts}. Every interval is over seeds (Student-t; Welch for differences)."
    fewest = min(len(r.seeds) for r in rows)
    if fewest == 2:
        note += (f" With 2 seeds per variant a 95 % interval uses t = {t_critical(2):.1f} (1 degree of freedom), so "
                 "these intervals are wide: an inconclusive verdict is expected unless the part matters a lot.")
    elif fewest < 2:
        note += " A recipe with 1 seed has no interval and no verdict."
    return note


def task_line(full: Recipe) -> str:
    """The task every recipe shares: env, horizon, training budget and test budget."""
    c = full.config
    parts = [f"env `{c.get('env.name')}`"]
    if "env.kwargs.n_stages" in c:
        parts.append(f"{c['env.kwargs.n_stages']} decisions")
    parts.append(f"budget {c.get('budget.kind')}={c.get('budget.amount')}")
    parts.append(f"test budget {c.get('eval.tasks')} tasks x {c.get('eval.samples_per_task')} samples")
    return ", ".join(parts)


def render_ablation(method: str, full_dir: str | Path, variants: Sequence[tuple],
                    out: str | Path | None = None) -> tuple[str, list[AblationRow]]:
    """``(markdown, rows)``; ``variants``: ``(name, sweep_dir)`` or ``(name, sweep_dir, its method)``
    (``None`` or absent: ``method``); writes the markdown to ``out`` when given."""
    if not variants:
        raise ReportError("no variants given; allowed: one or more --variant NAME=SWEEP_DIR")
    full = load_recipe("full", full_dir, method)
    recipes = [full] + [load_recipe(name, d, (its[0] if its else None) or method) for name, d, *its in variants]
    rows = [ablation_row(full, r, method) for r in recipes]
    lines = [f"# Ablation of {method}", "",
             f"Each variant against the full recipe on the same task ({task_line(full)}). \"What changed\" lists "
             "the variant runs' `algo.*` config values that differ from the full recipe's. Final held-out success: "
             "`eval/success` of each run's summary.json.", ""]
    lines += [f"- {r.name}: `{r.sweep_dir}`" for r in recipes]
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    lines += ["", seeds_note(rows), ""]
    markdown = "\n".join(lines)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(markdown)
    return markdown, rows


def parse_variant(text: str) -> tuple[str, str, str | None]:
    """``NAME=SWEEP_DIR`` -> ``(NAME, SWEEP_DIR, None)``; ``NAME=SWEEP_DIR@METHOD`` -> ``(NAME,
    SWEEP_DIR, METHOD)``."""
    name, sep, rest = text.partition("=")
    path, at, variant_method = rest.rpartition("@") if "@" in rest else (rest, "", "")
    if not sep or not name.strip() or not path.strip() or (at and not variant_method.strip()):
        raise ReportError(f"--variant {text!r}: expected NAME=SWEEP_DIR or NAME=SWEEP_DIR@METHOD")
    return name.strip(), path.strip(), variant_method.strip() or None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.report.ablation", description=__doc__.splitlines()[0])
    p.add_argument("--method", required=True, help="the method (algo.name) whose recipe is ablated")
    p.add_argument("--full", required=True, help="sweep directory of the full recipe's runs")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=SWEEP_DIR of one variant, or NAME=SWEEP_DIR@METHOD for the runs of another registered "
                        "method there (repeatable)")
    p.add_argument("--out", default=None, help="also write the markdown to this file")
    a = p.parse_args(argv)
    try:
        variants = [parse_variant(v) for v in a.variant]
        names = [v[0] for v in variants]
        if len(set(names)) != len(names) or "full" in names:
            raise ReportError(f"variant names must be distinct and not 'full'; got {', '.join(names)}")
        markdown, _ = render_ablation(a.method, a.full, variants, a.out)
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    print(markdown)
    if a.out is not None:
        print(f"[ablation report written to {a.out}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
