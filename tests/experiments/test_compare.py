"""experiments/compare/job.py end to end: the real train.py as a multirun at ``--tiny`` scale (2
algorithms x 2 seeds, 16 rollouts each; Hydra's basic launcher, the ``--tiny`` default), then the
report and the offline W&B summary run, all inside tmp_path (cwd, sweep dir, warm-start cache); and
which launcher a sweep gets (fast). The joblib launcher runs train.py for real in
tests/test_readme_commands.py (the ``experiments.train -m`` sweep) and tests/experiments/test_launchers.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from entry import run_entry
from experiments.compare.job import PRESETS, sweep_command
from experiments.runfiles.axes import COMPUTE_AXES
from wandb_records import offline_run_contents

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_sweep_command_and_argument_errors(tmp_path):
    cmd = sweep_command("small", tmp_path / "s", "grp", launcher="joblib", jobs=2, seeds=[0, 1],
                        overrides=["budget.amount=8"])
    assert cmd[1:5] == ["-m", "experiments.train", "-m", "experiment=compare_small"]
    assert f"hydra.sweep.dir={tmp_path / 's'}" in cmd and "logger.group=grp" in cmd
    assert "hydra.launcher.n_jobs=2" in cmd and "seed=0,1" in cmd and cmd[-1] == "budget.amount=8"
    presets = {p.stem for p in (Path(__file__).parents[2] / "configs" / "experiment").glob("compare_*.yaml")}
    assert set(PRESETS.values()) == presets - {"compare_base"}  # the base every preset inherits from
    with pytest.raises(ValueError, match="allowed: small, bugfix, horizon, pairfix, smollm2$"):
        sweep_command("huge", tmp_path, "g")
    with pytest.raises(ValueError, match="joblib"):
        sweep_command("small", tmp_path, "g", launcher="ray", jobs=2)
    with pytest.raises(ValueError, match="unknown launcher 'loky'; allowed: basic, joblib, ray"):
        sweep_command("small", tmp_path, "g", launcher="loky")


@pytest.mark.parametrize("argv, launcher", [
    ([], "joblib"),  # make demo and every real sweep: 2 jobs at a time
    (["--tiny"], "basic"),  # a smoke test: jobs one after another in the multirun process
    (["--tiny", "--launcher", "joblib"], "joblib"),  # a named launcher always wins
    (["--tiny", "--launcher", "ray"], "ray"),
    (["--tiny", "--jobs", "2"], "joblib"),  # --jobs is a joblib knob
    (["--launcher", "ray"], "ray"),
])
def test_tiny_sweeps_use_the_basic_launcher_unless_one_is_named(argv, launcher, monkeypatch, capsys):
    import experiments.compare.job as C

    assert C.sweep_launcher(None, tiny=True, jobs=None) == "basic"
    monkeypatch.setattr(C, "run_sweep", lambda *a, **k: pytest.fail("--dry-run must not start the sweep"))
    assert C.main(["--dry-run", *argv]) == 0
    cmd = capsys.readouterr().out.split()
    assert [a for a in cmd if a.startswith("hydra/launcher=")] == [f"hydra/launcher={launcher}"]
    assert ("hydra.launcher.n_jobs=2" in cmd) == ("--jobs" in argv)


@pytest.mark.slow
def test_compare_tiny_end_to_end(tmp_path):
    """The README's plain ``python -m experiments.compare`` (what ``make demo`` runs) and its
    ``python -m experiments.report runs/compare/<sweep>``, at ``--tiny`` scale (two seeds)."""
    sweep = tmp_path / "sweep"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), WANDB_BASE_URL="http://127.0.0.1:9")  # no creds, no server
    (tmp_path / "home").mkdir()
    # the job in this process (tests/entry.py), its sweep a real subprocess in its own session
    out = run_entry("experiments.compare", ["--tiny", "--seeds", "0,1", "--sweep-dir", str(sweep), "--",
                                            f"warmstart.cache_dir={tmp_path / 'ws'}"], cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = (sweep / "sweep.log").read_text()
    assert log.startswith("$ ") and " hydra/launcher=basic " in log.splitlines()[0]  # --tiny's launcher

    # One run directory per (algo, seed), named by the preset's hydra.sweep.subdir.
    runs = sorted(p.name for p in sweep.iterdir() if (p / "summary.json").is_file())
    assert runs == ["bugfix-grpo-s0", "bugfix-grpo-s1", "bugfix-ppo-s0", "bugfix-ppo-s1"]
    summaries = {r: json.loads((sweep / r / "summary.json").read_text()) for r in runs}
    # Compute-matched: same rollout budget spent, same start model, same test budget.
    assert {s["compute/rollouts"] for s in summaries.values()} == {16}  # 2 updates of 2 tasks x 4
    assert len({s["start_model/path"] for s in summaries.values()}) == 1
    configs = {r: yaml.safe_load((sweep / r / "config.yaml").read_text()) for r in runs}
    assert {(c["eval"]["tasks"], c["eval"]["samples_per_task"]) for c in configs.values()} == {(2, 2)}
    assert configs["bugfix-ppo-s1"]["run_dir"] == str(sweep / "bugfix-ppo-s1")

    # The report: printed, written, with both methods and valid PNGs.
    report = (sweep / "report.md").read_text()
    assert report.strip() in out.stdout
    assert "| bugfix | grpo | 2 | 2 tasks x 2 samples |" in report
    assert "| bugfix | ppo | 2 | 2 tasks x 2 samples |" in report
    assert "n/a (GRPO has no critic)" in report
    pngs = sorted(sweep.glob("*.png"))
    assert len(pngs) == 6 and all(p.read_bytes()[:8] == PNG_MAGIC for p in pngs)

    # W&B offline: every training run in the sweep's group with its algorithm as job_type ...
    for r in runs:
        (wdir,) = (sweep / r / "wandb").glob("offline-run-*")
        c = offline_run_contents(wdir)
        assert c["run"]["group"] == "sweep" and c["run"]["job_type"] == r.split("-")[1]
        assert c["metrics"]["rollout/*"] == "compute/rollouts" and c["exit_code"] == 0
    # Every x-axis usable: each history row that plots a key (eval/, rollout/, train/, critic/)
    # holds every compute counter too (W&B samples a non-Step x-axis only from the same log call)
    for r in runs:
        (wdir,) = (sweep / r / "wandb").glob("offline-run-*")
        rows = [h for h in offline_run_contents(wdir)["history"]
                if any(k.startswith(("eval/", "rollout/", "train/", "critic/")) and not k.startswith("eval/transcripts")
                       for k in h)]
        assert rows and all(all(c in h for c in COMPUTE_AXES) for h in rows), r
    # The W&B dashboard specs, written offline at the end of the sweep (experiments.dashboard)
    assert (sweep / "dashboard" / "workspace.json").is_file() and (sweep / "dashboard" / "report.json").is_file()
    assert "W&B dashboard specs:" in out.stderr
    # ... and one summary run with the tables and the plots.
    (wdir,) = (sweep / "wandb").glob("offline-run-*")
    c = offline_run_contents(wdir)
    assert c["run"] == {**c["run"], "group": "sweep", "job_type": "report", "name": "sweep-report"}
    (row,) = [h for h in c["history"] if "report/final_table.path" in h]
    table = json.loads((wdir / "files" / row["report/final_table.path"]).read_text())
    assert [r[:3] for r in table["data"]] == [["bugfix", "grpo", 2], ["bugfix", "ppo", 2]]
    images = {k for h in c["history"] for k, v in h.items() if k.endswith("._type") and v == "image-file"}
    assert len(images) == 6
    assert not list(tmp_path.glob("home/.netrc"))

    # The README's `python -m experiments.report runs/compare/<sweep>`: re-rendering the sweep
    # from its run directories (references cached in references.json) gives the same report but
    # for the title line (compare names its preset there; the re-render has the default title).
    out = run_entry("experiments.report", [str(sweep)], cwd=tmp_path, env=env)  # in this process (tests/entry.py)
    assert out.returncode == 0, out.stderr[-3000:]
    rerendered = (sweep / "report.md").read_text()
    assert out.stdout.strip() == rerendered.strip() and rerendered.startswith("# GRPO vs PPO")
    assert rerendered.splitlines()[1:] == report.splitlines()[1:]
