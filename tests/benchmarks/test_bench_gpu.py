"""``python -m benchmarks gpu``: the GPU script's CPU-side part, a CUDA-less dry run of the
whole script on the tiny Hugging Face model's config (random weights, 2 blocks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from entry import run_entry  # noqa: E402
from benchmarks.gpu import PEAK_TFLOPS, export_config, peak_tflops  # noqa: E402
from experiments.compare.job import PRESET_METHODS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_peak_by_device_name_and_the_exported_files(tmp_path, hf_model_dir):
    assert peak_tflops("NVIDIA H100 80GB HBM3") == PEAK_TFLOPS["H100"] == 989.0
    assert peak_tflops("NVIDIA GeForce GTX 1080") is None
    names = export_config(Path(hf_model_dir), tmp_path / "cfg")
    assert "config.json" in names and not any(p.suffix == ".safetensors" for p in (tmp_path / "cfg").iterdir())
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        export_config(tmp_path / "empty", tmp_path / "x")


@pytest.mark.slow
def test_the_gpu_script_dry_run_on_the_cpu(tmp_path, hf_model_dir):
    done = run_entry("benchmarks", ["gpu", "--model-config", str(hf_model_dir), "--out", str(tmp_path / "out"),
                                           "--dry-run"], cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "gpu.json").read_text())
    assert result["device"] == "cpu" and result["dtype"] == "float32" and result["dry_run"]
    assert [t["algo"] for t in result["train"]] == list(PRESET_METHODS["smollm2"])
    # the dry run's 1 task x 4 rollouts per update, budget 4: one update
    assert all((t["summary"].get("updates"), t["summary"].get("compute/rollouts")) == (1, 4) for t in result["train"])
    assert {result["rollout"]["bench"], result["update"]["bench"]} == {"shared_rollout", "shared_update"}
    assert "DRY RUN (2 blocks), not a measurement" in (tmp_path / "out" / "gpu.md").read_text()
