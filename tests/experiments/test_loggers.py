"""experiments/runtime/loggers.py: a real offline W&B run, read back from its files after finish().

The run's ``run-<id>.wandb`` transaction log is decoded with ``tests/wandb_records.py``'s ``read_wandb_records``
(a LevelDB-log reader with checksum verification; wandb 0.31 ships no Python reader) and checked
for the config, the define_metric (x-axis) records, the history rows, the table and the image.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments.runfiles.axes import COMPUTE_AXES
from experiments.runtime.loggers import NoneLogger, PLOTTED_NAMESPACES, WandbLogger, flatten_config, make_logger
from wandb_records import offline_run_contents, read_wandb_records

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def isolated_wandb_env(tmp_path, monkeypatch):
    """No credentials anywhere and an unreachable server: an offline run must not care."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "home" / ".config" / "wandb"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "home" / ".cache" / "wandb"))
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    (tmp_path / "home").mkdir()


def _png(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    plt.close(fig)
    return path


def test_unknown_kind_lists_allowed(tmp_path):
    with pytest.raises(ValueError, match=r"unknown logger kind 'tensorboard'; allowed: none, wandb"):
        make_logger("tensorboard", tmp_path, "r", None, None, {})


def test_none_logger_is_a_real_noop(tmp_path):
    lg = make_logger("none", tmp_path / "run", "r", "g", "grpo", {"a": 1})
    assert type(lg) is NoneLogger and lg.kind == "none"
    lg.define_x_axes()
    lg.log({"compute/rollouts": 1, "rollout/success_rate": 0.5})
    lg.log_images({"x": tmp_path / "missing.png"})
    lg.log_table("t", ["a"], [[1]])
    lg.finish()
    assert not (tmp_path / "run").exists()  # wrote nothing
    with pytest.raises(ValueError, match="step_metric"):
        lg.define_x_axes(step_metric="compute/nope")
    with pytest.raises(ValueError, match="not a compute counter"):
        lg.define_x_axes(axes=["rollout/success_rate"], step_metric="rollout/success_rate")


def test_flatten_config_dotted_keys():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"algo": {"name": "ppo", "clip": {"low": 0.2}}, "seeds": [0, 1], "x": "${algo.name}"})
    assert flatten_config(cfg) == {"algo.name": "ppo", "algo.clip.low": 0.2, "seeds": [0, 1], "x": "ppo"}


def test_wandb_offline_run_files(tmp_path, isolated_wandb_env):
    run_dir = tmp_path / "run0"
    config = {"algo": {"name": "grpo", "group_size": 4}, "seed": 3, "env": {"name": "bugfix"}}
    lg = make_logger("wandb", run_dir, name="grpo-s3", group="sweep-abc", job_type="grpo", config=config)
    assert isinstance(lg, WandbLogger)
    assert os.environ["WANDB_MODE"] == "offline"
    lg.define_x_axes()
    for u in range(1, 4):
        lg.log({"update": u, "algo": "grpo", "compute/rollouts": 8 * u, "compute/generated_tokens": 100 * u,
                "rollout/success_rate": 0.1 * u, "train/loss": 1.0 / u})
    lg.log_table("final_table", ["method", "success"], [["grpo", 0.5], ["ppo", 0.25]])
    lg.log_images({"plot": _png(tmp_path / "p.png")})
    with pytest.raises(ValueError, match="row 0 has 1 values"):
        lg.log_table("bad", ["a", "b"], [[1]])
    with pytest.raises(FileNotFoundError):
        lg.log_images({"gone": tmp_path / "gone.png"})
    lg.finish()
    lg.finish()  # idempotent

    wandb_dirs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(wandb_dirs) == 1 and wandb_dirs[0] == lg.wandb_dir
    contents = offline_run_contents(wandb_dirs[0])

    assert contents["exit_code"] == 0
    assert contents["run"]["name"] == "grpo-s3"
    assert contents["run"]["group"] == "sweep-abc"
    assert contents["run"]["job_type"] == "grpo"
    assert contents["config"] == {"algo.name": "grpo", "algo.group_size": 4, "seed": 3, "env.name": "bugfix"}

    # x-axes: each compute counter its own metric; each namespace a glob stepped by compute/rollouts.
    expected = {axis: None for axis in COMPUTE_AXES}
    expected.update({f"{ns}/*": "compute/rollouts" for ns in PLOTTED_NAMESPACES})
    assert contents["metrics"] == expected

    hist = contents["history"]
    metric_rows = [h for h in hist if "rollout/success_rate" in h]
    assert [h["compute/rollouts"] for h in metric_rows] == [8, 16, 24]
    assert [h["rollout/success_rate"] for h in metric_rows] == pytest.approx([0.1, 0.2, 0.3])
    assert [h["update"] for h in metric_rows] == [1, 2, 3]

    (table_row,) = [h for h in hist if "final_table._type" in h]
    assert table_row["final_table._type"] == "table-file"
    table = json.loads((wandb_dirs[0] / "files" / table_row["final_table.path"]).read_text())
    assert table["columns"] == ["method", "success"]
    assert table["data"] == [["grpo", 0.5], ["ppo", 0.25]]

    (image_row,) = [h for h in hist if "plot._type" in h]
    assert image_row["plot._type"] == "image-file"
    assert (wandb_dirs[0] / "files" / image_row["plot.path"]).read_bytes()[:8] == PNG_MAGIC

    # Nothing marked as synced: the run exists only on disk.
    assert not list(wandb_dirs[0].glob("*.synced"))


def test_transaction_log_reader_rejects_corruption(tmp_path, isolated_wandb_env):
    lg = make_logger("wandb", tmp_path / "r", name="n", group=None, job_type=None, config={})
    lg.log({"compute/rollouts": 1})
    lg.finish()
    offline_run_contents(lg.wandb_dir)  # waits until wandb-core has written the exit record
    (log,) = lg.wandb_dir.glob("run-*.wandb")
    assert len(read_wandb_records(log)) > 3
    data = bytearray(log.read_bytes())
    data[20] ^= 0xFF
    bad = tmp_path / "bad.wandb"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        read_wandb_records(bad)
    # A file cut mid-chunk (still being written): strict raises, non-strict keeps what is complete.
    whole = read_wandb_records(log)
    bad.write_bytes(log.read_bytes()[:-5])
    with pytest.raises(ValueError, match="truncated chunk"):
        read_wandb_records(bad)
    assert len(read_wandb_records(bad, strict=False)) == len(whole) - 1
    bad.write_bytes(b"not a log")
    with pytest.raises(ValueError, match="not a W&B transaction log"):
        read_wandb_records(bad)
