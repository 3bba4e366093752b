"""experiments.compare ``--methods``: parsing and validation (fast, no compute), the sweep
command, the report's baseline order, and ONE tiny end-to-end sweep of GRPO vs GiGPO on the horizon
preset (the README's ``--methods`` example; slow)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import envs
from entry import run_entry
from algos.metric_keys import wall_clock
from experiments.compare import job as C
from experiments.runtime.schema import ALGO_SCHEMAS, method_envs
from experiments.report.conclusion import compare_at_matched_budgets
from experiments.report.load import group_runs, load_runs, method_order
from experiments.report.markdown import _conclusion_md
from report_fixtures import write_run

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = "allowed: grpo, ppo, ppo_segment_terminal, ppo_long, rloo, gigpo, grpo_process, ppo_independent, ppo_ctde, grouped_value"


def test_every_compare_method_is_a_registered_trainer_with_a_config():
    from algos.registry import load_builtin_trainers, trainer_traits

    trainers = load_builtin_trainers()
    for name, traits in C.compare_methods().items():
        assert name in trainers and name in ALGO_SCHEMAS and trainer_traits(name) is traits
        assert (ROOT / "configs" / "algo" / f"{name}.yaml").is_file()
        # its envs are env specs (LongHorizon-v1, env long_horizon, has no preset: claims and
        # env=long_horizon runs only), and at least one preset trains on one of them
        runs_on = set(method_envs(traits))
        assert runs_on <= {s.name for s in envs.SPECS} and runs_on & set(C.PRESET_ENVS.values())
    assert C.registry_methods() == ["grpo", "ppo", "ppo_segment_terminal", "ppo_long", "rloo", "gigpo",
                                    "grpo_process", "ppo_independent", "ppo_ctde", "grouped_value"]
    assert set(C.PRESET_ENVS) == set(C.PRESETS)


def test_parse_methods_keeps_the_order_and_names_bad_values(monkeypatch):
    assert C.parse_methods("grpo,ppo") == C.DEFAULT_METHODS
    assert C.parse_methods(" rloo , grpo,gigpo") == ("rloo", "grpo", "gigpo")  # first = baseline
    with pytest.raises(C.MethodError, match=rf"'foo' is not a registered trainer; {ALLOWED}$"):
        C.parse_methods("grpo,foo")
    with pytest.raises(C.MethodError, match="empty name"):
        C.parse_methods("grpo,,ppo")
    with pytest.raises(C.MethodError, match="names grpo more than once"):
        C.parse_methods("grpo,ppo,grpo")
    with pytest.raises(C.MethodError, match="names one method"):
        C.parse_methods("grpo")


def test_reward_mode_override_reads_the_last_one_with_or_without_plus():
    assert C.reward_mode_override(["budget.amount=8"]) is None
    assert C.reward_mode_override(["+env.kwargs.reward_mode=process"]) == "process"
    assert C.reward_mode_override(["env.kwargs.reward_mode=outcome", "++env.kwargs.reward_mode=biased_process"]) \
        == "biased_process"


def test_grpo_process_needs_step_rewards_and_a_bugfix_preset():
    C.check_methods(("grpo", "ppo", "rloo", "gigpo"), "horizon")  # no requirement
    C.check_methods(("grpo", "grpo_process"), "small", ["+env.kwargs.reward_mode=process"])
    C.check_methods(("grpo", "grpo_process"), "bugfix", ["+env.kwargs.reward_mode=biased_process"])
    with pytest.raises(C.MethodError, match=r"needs step rewards but got no reward_mode override; add the override "
                                            r"`-- \+env.kwargs.reward_mode=process`"):
        C.check_methods(("grpo", "grpo_process"), "small")
    with pytest.raises(C.MethodError, match="got env.kwargs.reward_mode=outcome"):
        C.check_methods(("grpo", "grpo_process"), "small", ["+env.kwargs.reward_mode=outcome"])
    with pytest.raises(C.MethodError, match=r"does not run on preset 'horizon' \(env long_horizon_v3\) \(env "
                                            r"long_horizon_v3 has no step rewards\); grpo_process runs on env bugfix$"):
        C.check_methods(("grpo", "grpo_process"), "horizon", ["+env.kwargs.reward_mode=process"])
    with pytest.raises(C.MethodError, match=r"preset 'small' \(env long_horizon\)"):  # an env= override counts
        C.check_methods(("grpo", "grpo_process"), "small", ["env=long_horizon", "+env.kwargs.reward_mode=process"])


def test_ppo_segment_terminal_needs_a_sweep_with_compression():
    C.check_methods(("ppo", "ppo_segment_terminal"), "horizon")  # the preset's structured_summary
    C.check_methods(("ppo", "ppo_segment_terminal"), "small", ["compression=recent"])
    assert (C.PRESET_COMPRESSION["horizon"], C.PRESET_COMPRESSION["small"]) == ("structured_summary", "none")
    with pytest.raises(C.MethodError, match=r"^--methods: 'ppo_segment_terminal' differs from its base method only at "
                                            r"compression boundaries but the sweep runs compression=none; add the "
                                            r"override `-- compression=structured_summary`"):
        C.check_methods(("ppo", "ppo_segment_terminal"), "small")
    with pytest.raises(C.MethodError, match="runs compression=none"):  # a compression= override counts
        C.check_methods(("ppo", "ppo_segment_terminal"), "horizon", ["compression=none"])
    with pytest.raises(C.MethodError, match=r"does not run on preset 'pairfix' \(env pairfix\); ppo_segment_terminal "
                                            r"runs on env bugfix, long_horizon, long_horizon_v3$"):
        C.check_methods(("ppo_segment_terminal", "ppo"), "pairfix")


def test_sweep_command_adds_the_algo_sweep_only_for_other_methods(tmp_path):
    today = C.sweep_command("small", tmp_path, "g", seeds=[0])
    assert C.sweep_command("small", tmp_path, "g", seeds=[0], methods=C.DEFAULT_METHODS) == today
    assert not any(a.startswith("algo=") for a in today)  # the preset's sweeper params: algo grpo,ppo
    cmd = C.sweep_command("horizon", tmp_path, "g", seeds=[0], methods=("grpo", "gigpo"), overrides=["x=1"])
    assert cmd[4] == "experiment=compare_horizon" and cmd[-3:] == ["algo=grpo,gigpo", "seed=0", "x=1"]


def test_horizon_preset_sweeps_its_three_methods_on_long_horizon_v3_with_a_terminating_turn_limit():
    root = Path(__file__).resolve().parents[2] / "configs"
    data = yaml.safe_load((root / "experiment" / "compare_horizon.yaml").read_text())
    assert set(data["hydra"]["sweeper"]["params"]["algo"].split(",")) == set(C.PRESET_METHODS["horizon"])
    assert C.PRESET_METHODS["horizon"][0] == "grpo"  # the baseline of the Conclusion
    assert {"override /env": "long_horizon_v3"} in data["defaults"] and C.PRESET_ENVS["horizon"] == "long_horizon_v3"
    assert {"override /compression": "structured_summary"} in data["defaults"]
    # 200 tasks x 2 attempts = 400 scored attempts per evaluation (samples_per_task from compare_base)
    assert data["eval"]["tasks"] * 2 == 400
    env = yaml.safe_load((root / "env" / "long_horizon_v3.yaml").read_text())
    assert env["env"]["kwargs"]["time_limit"] == "termination"
    C.check_methods(C.PRESET_METHODS["horizon"], "horizon")


def test_presets_and_their_envs_are_read_from_the_experiment_files():
    # PRESETS: every compare_<preset>.yaml that includes compare_base; PRESET_ENVS: the env.name Hydra
    # composes for it; PRESET_METHODS: its sweeper's algo set, baseline first (the env spec's agents)
    from hydra import compose, initialize_config_dir

    from experiments.runtime.config import CONFIG_DIR, register_configs

    assert list(C.PRESETS) == ["small", "bugfix", "horizon", "pairfix", "smollm2"]
    # LongHorizon-v1 (env=long_horizon) stays registered for its claims; no compare preset trains on it
    assert "long_horizon" not in C.PRESET_ENVS.values()
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        for preset, experiment in C.PRESETS.items():
            cfg = compose(config_name="config", overrides=[f"experiment={experiment}"], return_hydra_config=True)
            assert C.PRESET_ENVS[preset] == cfg.env.name, preset
            assert set(C.PRESET_METHODS[preset]) == set(str(cfg.hydra.sweeper.params.algo).split(",")), preset


def test_a_preset_is_read_from_its_composed_config():
    # compare_smollm2 includes compare_base and bugfix_tutorial_tasks and overrides /policy: the
    # env comes from config.yaml's defaults (bugfix), the algo sweep from compare_base (ppo,grpo,
    # baseline first: grpo, ppo); compare_horizon overrides /env and /compression itself
    assert C.read_preset("compare_smollm2") == C.Preset("compare_smollm2", "bugfix", "none", ("grpo", "ppo"))
    assert C.read_preset("compare_horizon") == C.Preset("compare_horizon", "long_horizon_v3", "structured_summary",
                                                        ("grpo", "ppo", "gigpo"))
    assert C.PRESET_COMPRESSION == {"small": "none", "bugfix": "none", "horizon": "structured_summary",
                                    "pairfix": "none", "smollm2": "none"}


def test_main_rejects_bad_methods_before_any_compute(monkeypatch, capsys):
    def no_sweep(*a, **k):
        raise AssertionError("the sweep must not start")

    monkeypatch.setattr(C, "run_sweep", no_sweep)
    assert C.main(["--methods", "grpo,bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"compare: --methods: 'bogus' is not a registered trainer; {ALLOWED}"
    assert C.main(["--methods", "grpo,grpo_process", "--tiny"]) == 2
    assert "+env.kwargs.reward_mode=process" in capsys.readouterr().err
    assert C.main(["--dry-run", "--methods", "grpo,rloo,gigpo", "--tiny"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sweep: ") and " algo=grpo,rloo,gigpo seed=0 " in out


def test_report_compares_every_method_against_the_baseline(tmp_path):
    finals = {"rloo": [0.30, 0.31, 0.32], "grpo": [0.50, 0.51, 0.52], "ppo": [0.30, 0.31, 0.32]}
    for algo, values in finals.items():
        for seed, v in enumerate(values):
            write_run(tmp_path / f"{algo}{seed}", algo, "bugfix", seed, final=v, group_size=1 if algo == "ppo" else 4)
    runs = load_runs(tmp_path)
    assert method_order(["rloo", "ppo", "grpo"]) == ["grpo", "ppo", "rloo"]  # default: GRPO first
    assert method_order(["rloo", "ppo", "grpo"], ["rloo", "grpo"]) == ["rloo", "grpo", "ppo"]
    methods = group_runs(runs, ["rloo", "grpo", "ppo"])["bugfix"]
    comparisons = compare_at_matched_budgets("bugfix", methods)
    assert {(c.first, c.second) for c in comparisons} == {("rloo", "grpo"), ("rloo", "ppo")}
    assert len(comparisons) == 2 * 4  # one per (non-baseline method, axis)
    by = {(c.second, c.axis): c for c in comparisons}
    g = by["grpo", "compute/rollouts"]
    # GRPO - RLOO: +0.2 with the hand interval of test_conclusion_names_the_method_ahead ([0.177, 0.223], df 4)
    assert g.row()[3] == "GRPO - RLOO" and g.row()[6:] == ["+0.200", "[+0.177, +0.223]", "4.0", "**GRPO ahead**", "±0.023"]
    # PPO - RLOO: identical values, difference 0
    assert by["ppo", "compute/rollouts"].difference == pytest.approx(0.0)
    assert by["ppo", "compute/rollouts"].verdict == "inconclusive"
    md = "\n".join(_conclusion_md("bugfix", comparisons))
    assert ("Verdicts (bugfix, GRPO - RLOO): rollouts: GRPO ahead; generated_tokens: GRPO ahead; "
            "train_flops: GRPO ahead; wall_seconds: GRPO ahead.") in md
    # PPO - RLOO: d = 0, the same half-width 0.023 -> [-0.023, +0.023] rules out differences beyond 0.023
    assert ("Verdicts (bugfix, PPO - RLOO): rollouts: inconclusive (no difference larger than 0.023; "
            "calls ±0.023);") in md


#: The README's ``--methods`` example; tests/test_readme_commands.py leaves it to the test below
#: (one sweep instead of two).
README_COMMAND = ".venv/bin/python -m experiments.compare --preset horizon --methods grpo,gigpo"
#: the horizon preset at tiny scale: 4 decisions (LongHorizon-v3's fewest; tests/test_readme_commands.py's rule)
TINY_HORIZON = "env.kwargs.n_stages=4"


@pytest.mark.slow
def test_readme_methods_command_grpo_vs_gigpo_on_long_horizon_v3_end_to_end(tmp_path):
    import json

    assert README_COMMAND in (ROOT / "README.md").read_text()
    sweep = tmp_path / "sweep"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), WANDB_BASE_URL="http://127.0.0.1:9")  # no creds, no server
    (tmp_path / "home").mkdir()
    args = README_COMMAND.split()[3:]  # after ".venv/bin/python -m experiments.compare"
    # in this process, its sweep too (logger none; tests/entry.py's sweep_in_process)
    out = run_entry("experiments.compare", [*args, "--tiny", "--logger", "none", "--sweep-dir", str(sweep), "--",
                                            f"warmstart.cache_dir={tmp_path / 'ws'}", TINY_HORIZON],
                    cwd=tmp_path, env=env, sweeps_in_process=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = sorted(p.name for p in sweep.iterdir() if (p / "summary.json").is_file())
    assert runs == ["long_horizon_v3-gigpo-s0", "long_horizon_v3-grpo-s0"]  # --tiny: seed 0 only
    gigpo = [json.loads(x) for x in (sweep / runs[0] / "metrics.jsonl").read_text().splitlines()]
    assert len(gigpo) == 2 and all("train/anchor_hit_rate" in r and "train/step_groups" in r for r in gigpo)
    report = (sweep / "report.md").read_text()
    assert report.startswith("# GRPO vs GIGPO, compute-matched (compare_horizon)")
    assert "every other method minus the **baseline** (GRPO: the first of `--methods`" in report
    # the Conclusion names the non-baseline method; 1 seed: no interval, so inconclusive
    assert ("Verdicts (long_horizon_v3, GIGPO - GRPO): rollouts: inconclusive; generated_tokens: inconclusive; "
            "train_flops: inconclusive; wall_seconds: inconclusive.") in report
    assert "| long_horizon_v3 | gigpo | 1 | 2 tasks x 2 samples |" in report

    # --tiny's basic launcher ran the jobs one after another in one process, grpo first: gigpo's
    # numbers are those of gigpo trained alone (nothing leaks from one job into the next)
    log = (sweep / "sweep.log").read_text()
    assert " hydra/launcher=basic " in log.splitlines()[0]
    assert log.index('long_horizon_v3-grpo-s0"') < log.index('long_horizon_v3-gigpo-s0"')  # each job's result line
    alone = tmp_path / "alone"
    done = run_entry("experiments.train", ["experiment=compare_horizon", "algo=gigpo", "seed=0",
                                           f"warmstart.cache_dir={tmp_path / 'ws'}", TINY_HORIZON, C.TINY_PRESET,
                                           "logger.kind=none", f"run_dir={alone}"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    alone_lines = [json.loads(x) for x in (alone / "metrics.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in r.items() if not wall_clock(k)} for r in alone_lines] == \
        [{k: v for k, v in r.items() if not wall_clock(k)} for r in gigpo]


def test_diagnostics_report_the_anchor_hit_rate_of_gigpo_only(tmp_path):
    import json

    from experiments.report.tables import ANCHOR_NA, DIAG_COLUMNS, diagnostics_table

    for seed in (0, 1):
        write_run(tmp_path / f"g{seed}", "grpo", "long_horizon", seed, final=0.5)
        d = write_run(tmp_path / f"gi{seed}", "gigpo", "long_horizon", seed, final=0.5)
        lines = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        for line in lines:  # updates 1..4: hit rate 0.1 u + 0.2 seed
            line["train/anchor_hit_rate"] = 0.1 * line["update"] + 0.2 * seed
        (d / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = {r[1]: r for r in diagnostics_table(group_runs(load_runs(tmp_path)))}
    col = DIAG_COLUMNS.index("anchor hit rate (mean)")
    assert rows["grpo"][col] == ANCHOR_NA
    # per seed: mean of 0.1, 0.2, 0.3, 0.4 = 0.25 (+ 0.2 for seed 1): 0.25, 0.45 -> mean 0.35;
    # half-width t_(0.975, 1) * s / sqrt(2) = 12.706 * 0.141421 / 1.414214 = 1.271
    assert rows["gigpo"][col] == "0.350 ± 1.271"
