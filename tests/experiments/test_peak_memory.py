"""The run's peak-memory estimate (``experiments.runtime.peak_memory``): each term on a hand-sized
model, the token budget it reads, and the one-line stop before any compute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from algos.configs import ConfigError
from experiments.runtime.peak_memory import RUNTIME_BYTES, check_fits, estimate_peak, hf_dims, micro_batch_positions

ROOT = Path(__file__).resolve().parents[2]


def _model_dir(tmp_path: Path) -> Path:
    """A Llama-shaped config.json: 2 blocks of width 8, MLP 16, 2 heads of 4, 1 key/value head, 10 ids."""
    (tmp_path / "config.json").write_text(json.dumps({
        "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 4, "vocab_size": 10, "tie_word_embeddings": True}))
    return tmp_path


def _config(path: Path, budget, **kw) -> SimpleNamespace:
    policy = SimpleNamespace(kind="hf", path=str(path), lora_r=2, device="cpu", dtype="float32", max_len=32,
                             micro_batch_tokens=budget, sample_tokens=kw.get("sample_tokens"))
    return SimpleNamespace(policy=policy, warmstart=SimpleNamespace(batch_rows=4),
                           algo=SimpleNamespace(micro_batch_rows=2, kl_coef=kw.get("kl_coef", 0.0)),
                           rollout=SimpleNamespace(num_envs=kw.get("num_envs", 3)))


def test_model_dims_from_config_json(tmp_path):
    # a block: q 8x8 + k, v 2 x 8x4 + o 8x8 + gate, up, down 3 x 8x16 + 2 norms of 8 = 64 + 64 + 64 + 384 + 16 = 592
    # model: 2 x 592 + tied embedding 10 x 8 + final norm 8 = 1272
    # LoRA per rank and block: q (8+8) + k, v 2 x (8+4) + o (8+8) + gate, up 2 x (8+16) + down (16+8) = 128;
    # r = 2: 2 blocks x 128 x 2 = 512, plus a value head of 8 + 1 = 521
    d = hf_dims(str(_model_dir(tmp_path)), lora_r=2, dtype_bytes=4)
    assert (d.params, d.trainable, d.layers, d.kv_heads, d.head_dim) == (1272, 521, 2, 1, 4)
    assert hf_dims(str(tmp_path / "no-such-model"), 2, 4) is None


def test_each_term_of_the_estimate(tmp_path):
    c = _config(_model_dir(tmp_path), budget=48)
    est = estimate_peak(c)
    # T = min(rows 4 x window 32, max(budget 48, one row 32)) = 48
    assert est.tokens == micro_batch_positions(c) == 48
    assert est.weights == 1272 * 4
    assert est.optimizer == 3 * 521 * 4
    # 48 x 2 blocks x 4 bytes x (12 x 8 + 4 x 16 + 2 x 2 heads x 32) = 384 x 288
    assert est.activations == 384 * 288
    assert est.logits == 48 * 10 * 4 * 2
    # 3 rows x C = (32 + 32 // 4 + 64) + 32 = 136 columns x 2 blocks x (keys + values) x 1 head x 4 x 4 bytes
    assert est.kv_cache == 3 * 136 * 2 * 2 * 1 * 4 * 4 == 26112
    assert est.total == 5088 + 6252 + 110592 + 3840 + 26112 + RUNTIME_BYTES
    assert estimate_peak(_config(tmp_path, 48, kl_coef=0.1)).weights == 2 * 1272 * 4  # a frozen reference copy
    # no budget: the row caps, max(4, 2) rows x 32; a budget below one row still holds one row
    assert micro_batch_positions(_config(tmp_path, None)) == 128
    assert micro_batch_positions(_config(tmp_path, 5)) == 32


def test_the_sampling_token_budget_bounds_the_rows_and_the_cache_term(tmp_path):
    from experiments.runtime.build import sampling_rows

    # C = 136 columns per row at a 32-id window (above); 300 tokens // 136 = 2 rows of the 3 envs
    c = _config(_model_dir(tmp_path), 48, sample_tokens=300)
    assert sampling_rows(c) == 2 and sampling_rows(c, 1) == 1 and sampling_rows(c, 8) == 2
    assert estimate_peak(c).kv_cache == 2 * 136 * 2 * 2 * 1 * 4 * 4
    # below one row's columns it still samples one row; no budget: the rows asked for
    assert sampling_rows(_config(tmp_path, 48, sample_tokens=100)) == 1
    assert sampling_rows(_config(tmp_path, 48)) == 3 and sampling_rows(_config(tmp_path, 48), 8) == 8
    # the cache as the largest term names the sampling knob: 10 rows x 136 x 64 bytes = 87040 above
    # the 32-position micro-batch's activations, 32 x 2 x 4 x 288 = 73728
    big = _config(tmp_path, 1, num_envs=10)
    assert estimate_peak(big).kv_cache == 87040 > estimate_peak(big).activations == 73728
    with pytest.raises(ConfigError, match=r"lower policy.sample_tokens \(now null: rollout.num_envs rows, 10 rows\)$"):
        check_fits(big, available=RUNTIME_BYTES)


def test_a_config_that_cannot_fit_stops_with_one_line_naming_the_knob(tmp_path):
    c = _config(_model_dir(tmp_path), budget=None)
    with pytest.raises(ConfigError) as e:
        check_fits(c, available=RUNTIME_BYTES)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("estimated peak memory ")
    assert "lower policy.micro_batch_tokens (now null: rows x max_len, 128 positions)" in msg
    assert check_fits(c, available=100 * RUNTIME_BYTES).tokens == 128


def test_train_stops_before_any_compute_when_the_estimate_does_not_fit(tmp_path):
    env = {**os.environ, "AGENTRL_MEMORY_GIB": "0.01"}
    out = subprocess.run([sys.executable, "-m", "experiments.train", "experiment=tiny", f"runs_root={tmp_path}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("config error: estimated peak memory ") and "AGENTRL_MEMORY_GIB" in last
    assert not any(tmp_path.iterdir())  # no run directory: nothing was computed
