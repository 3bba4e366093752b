"""The ablation report (``python -m experiments.report.ablation``): a method's full recipe against
variants that each change ``algo.*`` keys, from one sweep directory per recipe."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from entry import run_entry
from experiments.report import ReportError
from experiments.report.ablation import ADDED_KEYS, load_recipe, render_ablation, what_changed
from experiments.runtime.schema import AlgoConfig
from algos.registry import load_builtin_trainers
from experiments.runtime.schema import TrainConfig
from report_fixtures import write_run

ROOT = Path(__file__).resolve().parents[2]
#: the full recipe's algo keys the variants below change (report_fixtures' runs have only name and G)
FULL_ALGO = {"critic_lam": 1.0, "value_warmup_updates": 2, "value_clip": 0.2}


def recipe_sweep(root: Path, finals: list[float], algo: dict | None = None, other: dict | None = None,
                 method: str = "ppo") -> Path:
    """Runs of ``method`` (seeds 0, 1, ...) with the given final held-out success, under
    ``root/n8`` as ``experiments.compare --horizons 8`` puts them; ``algo`` updates the full
    recipe's algo keys, ``other`` sets dotted non-algo keys. Each sweep has its own run_dir and
    logger group (bookkeeping, not recipe)."""
    for seed, final in enumerate(finals):
        run = write_run(root / "n8" / f"long_horizon_v3-{method}-s{seed}", method, "long_horizon_v3", seed, final=final)
        config = yaml.safe_load((run / "config.yaml").read_text())
        config["algo"].update({**FULL_ALGO, **(algo or {})})
        config["env"]["kwargs"] = {"n_stages": 8}
        config["run_dir"] = str(run)
        config["logger"] = {"kind": "none", "group": root.name, "name": run.name}
        for dotted, value in (other or {}).items():
            *parents, leaf = dotted.split(".")
            node = config
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        (run / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def test_rows_means_differences_and_verdicts_by_hand(tmp_path):
    full = recipe_sweep(tmp_path / "full", [0.6, 0.7, 0.8])
    recipe_sweep(tmp_path / "full", [0.1, 0.1, 0.1], method="grpo")  # another method in the dir: left out
    no_lam = recipe_sweep(tmp_path / "no_lam", [0.3, 0.4], algo={"critic_lam": None})
    no_warmup = recipe_sweep(tmp_path / "no_warmup", [0.7, 0.8], algo={"value_warmup_updates": 0})
    no_clip = recipe_sweep(tmp_path / "no_clip", [0.9, 0.95, 1.0], algo={"value_clip": None})
    markdown, rows = render_ablation("ppo", full, [("no_lam", no_lam), ("no_warmup", no_warmup),
                                                   ("no_clip", no_clip)])
    by = {r.name: r.cells() for r in rows}
    # full: mean(0.6, 0.7, 0.8) = 0.700, sd 0.1, t(2) = 4.303: 0.700 -+ 4.303 * 0.1 / sqrt(3) = 0.248
    assert by["full"][:6] == ["full", "(full recipe)", "3 (0, 1, 2)", "0.700 [0.452, 0.948]", "-", "reference"]
    # no_lam: mean(0.3, 0.4) = 0.350, sd 0.0707, t(1) = 12.706: half 12.706 * 0.0707 / sqrt(2) = 0.635
    # difference 0.350 - 0.700 = -0.350; Welch se = sqrt(0.01 / 3 + 0.005 / 2) = 0.0764, df = 2.88,
    # t(2.88) = 3.26: [-0.599, -0.101], below 0: behind
    assert by["no_lam"][:6] == ["no_lam", "`algo.critic_lam=None`", "2 (0, 1)", "0.350 [-0.285, 0.985]",
                                "-0.350 [-0.599, -0.101]", "behind"]
    # no_warmup: mean(0.7, 0.8) = 0.750; 0.750 - 0.700 = +0.050, same se and df: [-0.199, +0.299], inconclusive
    assert by["no_warmup"][1] == "`algo.value_warmup_updates=0`"
    assert by["no_warmup"][4:6] == ["+0.050 [-0.199, +0.299]", "inconclusive"]
    # no_clip: mean(0.9, 0.95, 1.0) = 0.950; +0.250, se = sqrt(0.01 / 3 + 0.0025 / 3) = 0.0645, df = 2.94,
    # t(2.94) = 3.22: [+0.042, +0.458], above 0: ahead
    assert by["no_clip"][4:6] == ["+0.250 [+0.042, +0.458]", "ahead"]
    # report_fixtures' PPO runs: held-out EV 0.2 * update, second half (updates 3, 4) = 0.7 on every
    # seed; wall seconds 0.5 * 4 updates = 2.0 on every seed
    assert all(cells[6:] == ["0.700 ± 0.000", "2.000 ± 0.000"] for cells in by.values())
    assert "Seeds per recipe: full 3, no_lam 2, no_warmup 2, no_clip 3." in markdown
    assert "With 2 seeds per variant a 95 % interval uses t = 12.7" in markdown
    assert "env `long_horizon_v3`, 8 decisions, budget rollouts=32" in markdown


def test_what_changed_lists_every_algo_key_from_the_configs(tmp_path):
    full = load_recipe("full", recipe_sweep(tmp_path / "full", [0.6, 0.7]), "ppo")
    two = load_recipe("two", recipe_sweep(tmp_path / "two", [0.5, 0.6], algo={"critic_lam": None, "value_clip": 0.5}),
                      "ppo")
    extra = load_recipe("extra", recipe_sweep(tmp_path / "extra", [0.5, 0.6], algo={"new_knob": 3}), "ppo")
    same = load_recipe("same", recipe_sweep(tmp_path / "same", [0.5, 0.6]), "ppo")
    assert what_changed(full, two) == ("algo.critic_lam=None", "algo.value_clip=0.5")
    assert what_changed(full, extra) == ("algo.new_knob=3",)  # a key the full recipe's runs do not have
    assert what_changed(full, same) == ()  # run_dir and logger.group differ: bookkeeping, not recipe


def test_a_variant_differing_outside_algo_is_an_error(tmp_path):
    full = recipe_sweep(tmp_path / "full", [0.6, 0.7])
    budget = recipe_sweep(tmp_path / "budget", [0.5, 0.6], other={"budget.amount": 64})
    with pytest.raises(ReportError, match=r"variant budget is not an ablation of the full recipe: "
                                          r"budget.amount=64 under .*budget.amount=32 under"):
        render_ablation("ppo", full, [("budget", budget)])
    horizon = recipe_sweep(tmp_path / "horizon", [0.5, 0.6], other={"env.kwargs.n_stages": 32})
    with pytest.raises(ReportError, match=r"env.kwargs.n_stages=32 under .*env.kwargs.n_stages=8 under"):
        render_ablation("ppo", full, [("horizon", horizon)])
    mixed = recipe_sweep(tmp_path / "mixed", [0.5, 0.6])
    s1 = mixed / "n8" / "long_horizon_v3-ppo-s1" / "config.yaml"
    config = yaml.safe_load(s1.read_text())
    config["algo"]["critic_lam"] = 0.5  # seed 1 ran another recipe
    s1.write_text(yaml.safe_dump(config))
    with pytest.raises(ReportError, match=r"are not one recipe: algo.critic_lam=1.0 in n8/long_horizon_v3-ppo-s0, "
                                          r"algo.critic_lam=0.5 in n8/long_horizon_v3-ppo-s1$"):
        load_recipe("mixed", mixed, "ppo")
    recipe_sweep(mixed / "again", [0.5])  # a second seed-0 run of ppo under the same dir
    with pytest.raises(ReportError, match=r"two runs of ppo with seed 0 under .*mixed: again/n8/long_horizon_v3-ppo-s0"
                                          r" and n8/long_horizon_v3-ppo-s0$"):
        load_recipe("mixed", mixed, "ppo")


def test_a_dir_without_the_method_is_an_error(tmp_path):
    full = recipe_sweep(tmp_path / "full", [0.6, 0.7])
    other = recipe_sweep(tmp_path / "other", [0.5, 0.6], method="grpo")
    with pytest.raises(ReportError, match=rf"no runs of ppo under {other}; methods found: grpo$"):
        render_ablation("ppo", full, [("other", other)])


def test_ablation_cli_prints_and_writes_the_table(tmp_path):
    full = recipe_sweep(tmp_path / "full", [0.6, 0.7, 0.8])
    no_lam = recipe_sweep(tmp_path / "no_lam", [0.3, 0.4], algo={"critic_lam": None})
    out = tmp_path / "out" / "ablation.md"
    done = run_entry("experiments.report.ablation", ["--method", "ppo", "--full", str(full),
                                                     "--variant", f"no_lam={no_lam}", "--out", str(out)], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    written = out.read_text()
    assert written.strip() == done.stdout.strip()
    assert "| no_lam | `algo.critic_lam=None` | 2 (0, 1) | 0.350 [-0.285, 0.985] | -0.350 [-0.599, -0.101] | behind |" \
        in written
    for argv, message in ((["--variant", "no_lam"], "expected NAME=SWEEP_DIR"),
                          ([], "no variants given"),
                          (["--variant", f"a={no_lam}", "--variant", f"a={no_lam}"], "must be distinct")):
        bad = run_entry("experiments.report.ablation", ["--method", "ppo", "--full", str(full), *argv], cwd=ROOT)
        assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("report: "), bad.stderr
        assert message in bad.stderr


def test_a_variant_may_be_another_registered_method_run_with_the_methods_settings(tmp_path):
    """``NAME=SWEEP_DIR@METHOD``: the runs of METHOD in that directory, e.g. ``ppo_segment_terminal``
    with ``ppo_long``'s settings; its row names ``algo.name`` among what changed."""
    full = recipe_sweep(tmp_path / "full", [0.6, 0.7, 0.8], method="ppo_long")
    terminal = recipe_sweep(tmp_path / "terminal", [0.3, 0.4], method="ppo_segment_terminal")
    done = run_entry("experiments.report.ablation", ["--method", "ppo_long", "--full", str(full),
                                                     "--variant", f"terminal={terminal}@ppo_segment_terminal"], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    # the numbers of test_rows_means_differences_and_verdicts_by_hand's no_lam row (0.3, 0.4 against 0.6, 0.7, 0.8)
    assert ("| terminal | `algo.name=ppo_segment_terminal` | 2 (0, 1) | 0.350 [-0.285, 0.985] | -0.350 [-0.599, -0.101] "
            "| behind |") in done.stdout
    without = run_entry("experiments.report.ablation", ["--method", "ppo_long", "--full", str(full),
                                                        "--variant", f"terminal={terminal}"], cwd=ROOT)
    assert without.returncode == 2 and "no runs of ppo_long under" in without.stderr
    bad = run_entry("experiments.report.ablation", ["--method", "ppo_long", "--full", str(full),
                                                    "--variant", f"terminal={terminal}@"], cwd=ROOT)
    assert bad.returncode == 2 and "expected NAME=SWEEP_DIR or NAME=SWEEP_DIR@METHOD" in bad.stderr


def test_a_key_a_runs_config_lacks_takes_the_schema_default(tmp_path):
    """A run made before a config key existed ran with that key's default (``ADDED_KEYS``, each the
    schema default): a variant that records the default is the same recipe, one that records
    another value is not."""
    defaults = OmegaConf.to_container(OmegaConf.structured(TrainConfig))
    for dotted, value in ADDED_KEYS.items():
        section, key = dotted.split(".")
        if section == "algo":  # a method's own key: the default of every registered schema that has it
            schemas = [AlgoConfig(name=n) for n in load_builtin_trainers()]
            assert {getattr(a, key) for a in schemas if hasattr(a, key)} == {value}, dotted
        else:
            assert defaults[section][key] == value, dotted
    full = recipe_sweep(tmp_path / "full", [0.6, 0.7])
    same = recipe_sweep(tmp_path / "same", [0.5, 0.6], other={"policy.env_instructions": False})
    assert what_changed(load_recipe("full", full, "ppo"), load_recipe("same", same, "ppo")) == ()
    other = recipe_sweep(tmp_path / "other", [0.5, 0.6], other={"policy.env_instructions": True})
    with pytest.raises(ReportError, match=r"policy.env_instructions=True under .*policy.env_instructions=False under"):
        render_ablation("ppo", full, [("other", other)])
