"""``experiments.compare --preset pairfix``: the two-agent methods in the compare job (preset,
methods, per-env ``--tiny`` overrides; fast), the report on synthetic two-agent run directories
(hand numbers; fast), and ONE tiny end-to-end sweep ppo_independent vs ppo_ctde (slow)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from entry import run_entry
from experiments.compare import job as C
from experiments.runtime.config import register_configs, validate
from experiments.runtime.schema import ConfigError
from experiments.report import ReportError, final_table, load_runs, render_report
from experiments.report.conclusion import compare_at_matched_budgets
from experiments.report.load import group_runs
from experiments.report.pair import PAIR_NA, REFERENCE_NA
from experiments.report.tables import agent_table, diagnostics_table

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = str(ROOT / "configs")
register_configs()


def compose_preset(preset: str, *overrides: str):
    """The validated TrainConfig of one run of ``preset`` (hydra's ${hydra:...} keys replaced)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        full = compose(config_name="config", overrides=[f"experiment={preset}", "run_dir=unused", *overrides],
                       return_hydra_config=True)
    HydraConfig.instance().set_config(full)
    with open_dict(full):
        del full["hydra"]
    return validate(full)


# --------------------------------------------------------------------------- preset and methods


def test_pairfix_preset_methods_and_baseline():
    assert C.PRESETS["pairfix"] == "compare_pairfix" and C.PRESET_ENVS["pairfix"] == "pairfix"
    assert C.PRESET_METHODS["pairfix"] == ("ppo_independent", "ppo_ctde")  # baseline first
    assert all(C.PRESET_METHODS[p] == C.DEFAULT_METHODS for p in ("small", "bugfix"))
    data = yaml.safe_load((ROOT / "configs" / "experiment" / "compare_pairfix.yaml").read_text())
    assert data["defaults"][0] == "compare_base"
    params = data["hydra"]["sweeper"]["params"]
    assert set(params["algo"].split(",")) == set(C.PRESET_METHODS["pairfix"]) and params["seed"] == "0,1,2"
    C.check_methods(("ppo_independent", "ppo_ctde"), "pairfix")
    with pytest.raises(C.MethodError, match=r"^--methods: 'grpo' does not run on preset 'pairfix' \(env pairfix\); "
                                            r"grpo runs on env bugfix, long_horizon, long_horizon_v3$"):
        C.check_methods(("ppo_ctde", "grpo"), "pairfix")
    with pytest.raises(C.MethodError, match=r"^--methods: 'ppo_ctde' does not run on preset 'horizon' "
                                            r"\(env long_horizon_v3\); ppo_ctde runs on env pairfix$"):
        C.check_methods(("grpo", "ppo_ctde"), "horizon")


@pytest.mark.filterwarnings("ignore:\\s*'hydra/launcher/\\w+' is validated against ConfigStore:UserWarning")
def test_pairfix_preset_composes_for_both_methods():
    for algo in C.PRESET_METHODS["pairfix"]:
        c = compose_preset("compare_pairfix", f"algo={algo}")
        # 128 pair episodes = 8 updates of 16; held-out 20 tasks x 2 samples; the start model at the same budget
        assert (c.env.name, c.algo.name, c.budget.kind, c.budget.amount) == ("pairfix", algo, "rollouts", 128)
        assert (c.algo.tasks_per_update, c.algo.group_size, c.compression.strategy) == (16, 1, "none")
        assert (c.eval.tasks, c.eval.samples_per_task, c.warmstart.eval_tasks) == (20, 2, 20)
        assert (c.warmstart.demos, c.warmstart.epochs) == (1000, 5)


def test_main_pairfix_defaults_to_its_methods_and_rejects_others_before_compute(monkeypatch, capsys):
    def no_sweep(*a, **k):
        raise AssertionError("the sweep must not start")

    monkeypatch.setattr(C, "run_sweep", no_sweep)
    assert C.main(["--preset", "pairfix", "--tiny", "--dry-run"]) == 0
    cmd = capsys.readouterr().out.split()
    assert "experiment=compare_pairfix" in cmd and not any(a.startswith("algo=") for a in cmd)  # the preset's sweep
    assert C.TINY_PRESET in cmd and "seed=0" in cmd  # the one tiny preset, its batch derived for two agents
    # the order of --methods is the report's (baseline first), not a new sweep
    assert C.main(["--preset", "pairfix", "--methods", "ppo_ctde,ppo_independent", "--dry-run"]) == 0
    assert not any(a.startswith("algo=") for a in capsys.readouterr().out.split())
    for argv, bad in ((["--preset", "pairfix", "--methods", "grpo,ppo"], "grpo"),
                      (["--methods", "ppo_ctde,ppo_independent"], "ppo_ctde")):
        assert C.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"compare: --methods: {bad!r} does not run on preset") and "\n" not in err


@pytest.mark.filterwarnings("ignore:\\s*'hydra/launcher/\\w+' is validated against ConfigStore:UserWarning")
def test_the_tiny_preset_validates_on_pairfix_with_a_pair_batch():
    # --tiny on pairfix: G=1 (a pair run's only group size), 8 // (2 agents x 1) = 4 pair episodes per
    # update, 2 updates = 8; on an env= override's env too
    c = compose_preset("compare_pairfix", "algo=ppo_ctde", C.TINY_PRESET)
    assert (c.budget.amount, c.algo.tasks_per_update, c.algo.group_size, c.policy.d_model, c.eval.tasks) == (8, 4, 1, 32, 2)
    moved = compose_preset("compare_small", "algo=ppo_ctde", C.TINY_PRESET, "env=pairfix", "env.kwargs.difficulty=easy")
    assert (moved.budget.amount, moved.algo.tasks_per_update, moved.algo.group_size) == (8, 4, 1)
    # the one-agent batch's G=4, given as a value, is the config error the derivation avoids
    with pytest.raises(ConfigError, match=r"algo.group_size=4 is not supported for env=pairfix; allowed: 1"):
        compose_preset("compare_pairfix", "algo=ppo_ctde", C.TINY_PRESET, "algo.group_size=4")


# --------------------------------------------------------------------------- report on synthetic pair runs

UPDATES = 4
PER_UPDATE = 16
#: final held-out team success per seed; the start model is 0.1 for every seed
FINAL = {"ppo_independent": [0.2, 0.3, 0.4], "ppo_ctde": [0.4, 0.5, 0.6]}


def write_pair_run(run_dir: Path, algo: str, seed: int, frozen: tuple[str, ...] = (),
                   drop_metric: str | None = None) -> Path:
    """A run directory shaped like experiments/runtime/pair.py's (keys of a real tiny run)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"seed": seed, "env": {"name": "pairfix", "id": "agentrl/PairFix-v2", "kwargs": {"difficulty": "easy"}},
              "algo": {"name": algo, "group_size": 1, "frozen": list(frozen)},
              "budget": {"kind": "rollouts", "amount": UPDATES * PER_UPDATE},
              "eval": {"tasks": 10, "samples_per_task": 2}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    final = FINAL[algo][seed]
    lines = []
    for u in range(1, UPDATES + 1):
        line = {"update": u, "algo": algo, "compute/rollouts": PER_UPDATE * u, "compute/generated_tokens": 400 * u,
                "compute/observation_tokens": 900 * u, "compute/tool_seconds": 0.0, "compute/wall_seconds": 2.0 * u,
                "compute/train_flops": (2e9 if algo == "ppo_ctde" else 1e9) * u,
                "rollout/success": 0.5, "rollout/success_rate": 0.5}
        for a, base in (("a", 0.1), ("b", 0.3)):
            if a in frozen:
                continue
            line[f"agent_{a}/critic/heldout_points"] = 20
            # EV a: 0.1 u (+0.2 for ctde), b: 0.3 + 0.1 u (+0.2 for ctde)
            line[f"agent_{a}/critic/explained_variance_heldout"] = base - 0.1 + 0.1 * u + (0.2 if algo == "ppo_ctde" else 0)
            line[f"agent_{a}/train/agg_weight_shift"] = 0.05
        if u % 2 == 0:
            line["eval/success"] = final if u == UPDATES else final / 2
        lines.append(line)
    if drop_metric:
        for line in lines:
            line.pop(drop_metric, None)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = {"eval/success": final, "start_model/success": 0.1, "start_model/path": "warmstart",
               "compute/rollouts": UPDATES * PER_UPDATE, "compute/generated_tokens": 400 * UPDATES,
               "compute/observation_tokens": 900 * UPDATES, "compute/tool_seconds": 0.0,
               "compute/train_flops": lines[-1]["compute/train_flops"], "compute/wall_seconds": 2.0 * UPDATES,
               "agent_a/eval/success_bug_in_a_only": final + 0.1 * seed, "agent_b/eval/success_bug_in_b_only": 0.0,
               "start_model/agent_a/eval/success_bug_in_a_only": 0.2, "start_model/agent_b/eval/success_bug_in_b_only": 0.0,
               "agent_a/eval/file_fixed": 0.5, "agent_b/eval/file_fixed": 0.75,
               "agent_a/eval/messages_sent": 1.0, "agent_b/eval/messages_sent": 2.0 * seed,
               "agent_a/eval/format_error_rate": 0.0, "agent_b/eval/format_error_rate": 0.25}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def pair_sweep(root: Path) -> Path:
    for algo in FINAL:
        for seed in range(3):
            write_pair_run(root / f"pairfix-{algo}-s{seed}", algo, seed)
    return root


def test_pair_runs_load_and_fill_the_final_and_diagnostics_tables(tmp_path):
    groups = group_runs(load_runs(pair_sweep(tmp_path)))  # default order: ppo_independent is the baseline
    assert list(groups["pairfix"]) == ["ppo_independent", "ppo_ctde"]
    rows = {r[1]: r for r in final_table(groups)}
    # ppo_ctde held-out: mean 0.5, s = 0.1, half = 4.303 * 0.1 / sqrt(3) = 0.248
    assert rows["ppo_ctde"][:5] == ["pairfix", "ppo_ctde", 3, "10 tasks x 2 samples", "0.500 ± 0.248"]
    assert rows["ppo_ctde"][-3:] == [PAIR_NA] * 3  # recovery, hack rate, mean turns: not logged
    diag = {r[1]: r for r in diagnostics_table(groups)}
    # 2nd half = updates 3, 4. ppo_independent a: mean(0.3, 0.4) = 0.35, b: mean(0.5, 0.6) = 0.55, same every seed
    assert diag["ppo_independent"][2:7] == ["1", *["n/a (G = 1)"] * 4]
    assert diag["ppo_independent"][7] == "a: 0.350 ± 0.000 / b: 0.550 ± 0.000"
    assert diag["ppo_ctde"][7] == "a: 0.550 ± 0.000 / b: 0.750 ± 0.000"  # + 0.2
    assert diag["ppo_ctde"][8] == "a: 0.550, 0.550, 0.550 / b: 0.750, 0.750, 0.750"
    assert diag["ppo_ctde"][9] == "a: 0.050 ± 0.000 / b: 0.050 ± 0.000"


def test_per_agent_table_hand_numbers(tmp_path):
    rows = {(r[1], r[2]): r for r in agent_table(group_runs(load_runs(pair_sweep(tmp_path))))}
    assert len(rows) == 4
    ctde_a = rows["ppo_ctde", "a"]
    # bug only in a: 0.4, 0.6, 0.8 -> mean 0.6, s 0.2, half 4.303 * 0.2 / sqrt(3) = 0.497
    assert ctde_a[3:8] == ["0.600 ± 0.497", "0.200 ± 0.000", "0.500 ± 0.000", "1.000 ± 0.000", "0.000 ± 0.000"]
    assert ctde_a[8:] == ["central (joint state)", "0.550 ± 0.000", "0.550, 0.550, 0.550"]
    ind_b = rows["ppo_independent", "b"]
    # messages 0, 2, 4 -> mean 2, s 2, half 4.303 * 2 / sqrt(3) = 4.968
    assert ind_b[6] == "2.000 ± 4.968" and ind_b[8:10] == ["local (own context)", "0.550 ± 0.000"]


def test_pair_conclusion_reads_ctde_minus_independent(tmp_path):
    groups = group_runs(load_runs(pair_sweep(tmp_path)), ["ppo_independent", "ppo_ctde"])
    by_axis = {c.axis: c for c in compare_at_matched_budgets("pairfix", groups["pairfix"])}
    c = by_axis["compute/rollouts"]  # matched at 64 pair episodes = every run's final eval
    assert (c.first, c.second) == ("ppo_independent", "ppo_ctde")
    # difference 0.5 - 0.3 = 0.2; both s = 0.1, n = 3: se = sqrt(0.01/3 * 2) = 0.08165, df = 4,
    # half = 2.776 * 0.08165 = 0.2267 -> [-0.027, +0.427] contains 0
    assert c.difference == pytest.approx(0.2)
    assert c.row()[3] == "PPO_CTDE - PPO_INDEPENDENT" and c.row()[6:] == ["+0.200", "[-0.027, +0.427]", "4.0",
                                                                         "**inconclusive**", "±0.227"]
    # on train FLOPs ctde spends 2e9 per update, independent 1e9: matched budget = the smallest final
    # counter, 4e9 = independent's end (0.3 mean) and ctde's update 2 (its eval final / 2: 0.25 mean)
    f = by_axis["compute/train_flops"]
    assert f.budget == pytest.approx(4e9) and f.difference == pytest.approx(0.25 - 0.3)


def test_pair_report_renders_references_na_and_per_agent_section(tmp_path):
    report = render_report(pair_sweep(tmp_path), methods=["ppo_independent", "ppo_ctde"])
    md = report.markdown
    assert md.startswith("# PPO_INDEPENDENT vs PPO_CTDE: compute-matched comparison")
    assert "Verdicts (pairfix, PPO_CTDE - PPO_INDEPENDENT): rollouts: inconclusive (no difference larger than 0.427;" in md
    assert f"| program-blind floor | {REFERENCE_NA} | n/a | n/a | 0 |" in md
    assert f"| oracle ceiling | {REFERENCE_NA} | n/a | n/a | 0 |" in md
    assert "| start model | warmstart | 0.100 |" in md
    assert "### Per agent (two-agent runs)" in md and "| pairfix | ppo_ctde | a | 0.600 ± 0.497 |" in md
    assert "do not log `rollout/stop/<reason>` counters" in md
    assert {p.suffix for p in report.images.values()} == {".png"}
    from experiments.report import report_tables

    columns, rows = report_tables(report)["report/agents"]  # the W&B table of the per-agent rows
    assert columns[:3] == ["env", "method", "agent"] and len(rows) == 4


def test_pair_run_contract_errors_name_the_key_and_frozen_agents_are_exempt(tmp_path):
    write_pair_run(tmp_path / "bad", "ppo_ctde", 0, drop_metric="agent_b/critic/heldout_points")
    with pytest.raises(ReportError, match=r"never has required key 'agent_b/critic/heldout_points'"):
        load_runs(tmp_path / "bad")
    write_pair_run(tmp_path / "frozen", "ppo_independent", 0, frozen=("b",))  # B never updated: no b critic
    (run,) = load_runs(tmp_path / "frozen")
    rows = {r[2]: r for r in agent_table({"pairfix": {"ppo_independent": [run]}})}
    assert rows["b"][9].startswith("n/a (undefined") and math.isclose(run.summary["eval/success"], 0.2)
    d = write_pair_run(tmp_path / "nosum", "ppo_ctde", 0)
    s = json.loads((d / "summary.json").read_text())
    del s["start_model/success"]
    (d / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ReportError, match="missing required key 'start_model/success'"):
        load_runs(tmp_path / "nosum")


# --------------------------------------------------------------------------- end to end

#: The README's pairfix compare command; tests/test_readme_commands.py leaves it to the test below.
README_COMMAND = ".venv/bin/python -m experiments.compare --preset pairfix"


@pytest.mark.slow
def test_readme_pairfix_compare_tiny_end_to_end(tmp_path):
    assert README_COMMAND in (ROOT / "README.md").read_text()
    sweep = tmp_path / "sweep"
    args = README_COMMAND.split()[3:]  # after ".venv/bin/python -m experiments.compare"
    # in this process, its sweep too (logger none; tests/entry.py's sweep_in_process)
    out = run_entry("experiments.compare", [*args, "--tiny", "--logger", "none", "--sweep-dir", str(sweep),
                                            "--", f"warmstart.cache_dir={tmp_path / 'ws'}"], cwd=tmp_path,
                    sweeps_in_process=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = sorted(p.name for p in sweep.iterdir() if (p / "summary.json").is_file())
    assert runs == ["pairfix-ppo_ctde-s0", "pairfix-ppo_independent-s0"]  # --tiny: seed 0 only
    for r in runs:
        summary = json.loads((sweep / r / "summary.json").read_text())
        assert summary["compute/rollouts"] == 8 and summary["updates"] == 2  # 2 updates of 4 pair episodes
        lines = [json.loads(x) for x in (sweep / r / "metrics.jsonl").read_text().splitlines()]
        assert len(lines) == 2 and all("agent_a/rollout/success" in x and "agent_b/train/policy_loss" in x for x in lines)
    report = (sweep / "report.md").read_text()
    assert report.startswith("# PPO_INDEPENDENT vs PPO_CTDE, compute-matched (compare_pairfix)")
    assert ("Verdicts (pairfix, PPO_CTDE - PPO_INDEPENDENT): rollouts: inconclusive; generated_tokens: inconclusive; "
            "train_flops: inconclusive; wall_seconds: inconclusive.") in report
    assert "| pairfix | ppo_ctde | 1 | 2 tasks x 2 samples |" in report
    assert "| pairfix | ppo_independent | a |" in report and "central (joint state)" in report
