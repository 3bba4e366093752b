"""``python -m benchmarks hf``: the action budget comes from the loaded model's tokenizer
(as a training run derives it), and the main job's projection is the documented arithmetic."""

from __future__ import annotations

import argparse

import pytest

pytest.importorskip("transformers")

from algos.hf_backend import load_layout  # noqa: E402
from benchmarks import hf as bench  # noqa: E402
from experiments.runtime.config import ACTION_TOKEN_MARGIN  # noqa: E402
from experiments.runtime.hf_tiny import TinyModelSpec, build_tiny_model_dir  # noqa: E402
from experiments.runtime.warmstart import demo_actions  # noqa: E402


@pytest.fixture(scope="module")
def small_vocab_model(tmp_path_factory):
    """A tiny model whose 300-id byte-level BPE spends more than 12 ids on BugFix's longest action."""
    return str(build_tiny_model_dir(tmp_path_factory.mktemp("hf300") / "m", TinyModelSpec(vocab_size=300, episodes=4)))


def test_the_rollout_budget_is_derived_from_the_models_tokenizer(small_vocab_model, monkeypatch, capsys):
    c = bench.action_config(small_vocab_model)
    layout = load_layout(small_vocab_model)
    longest = max(len(layout.action_ids(a)) - 1 for a in demo_actions(c))
    assert longest > 12  # the old hard-coded budget would not hold this tokenizer's demo actions
    assert c.rollout.max_action_tokens == longest + ACTION_TOKEN_MARGIN

    seen = []
    engine = bench.RolloutEngine

    def recording_engine(*args, **kwargs):
        seen.append(kwargs["max_action_tokens"])
        return engine(*args, **kwargs)
    monkeypatch.setattr(bench, "RolloutEngine", recording_engine)
    ap = argparse.ArgumentParser()
    bench.add_arguments(ap)
    a = ap.parse_args(["--model", small_vocab_model, "--rows", "2", "--new", "2", "--turns", "2", "--action", "2",
                       "--repeats", "1"])
    assert bench.run(a) == 0
    # the rollout bench, then the shared-prefix bench on reading tasks (their own demos' budget)
    assert seen == [longest + ACTION_TOKEN_MARGIN, bench.reading_config(small_vocab_model).rollout.max_action_tokens]
    out = capsys.readouterr().out
    assert "shared_rollout" in out and "shared_update" in out and ">= 2x" in out
    assert f"action budget {longest + ACTION_TOKEN_MARGIN}" in out
    assert "projected main job on this model: " in out and " min on this CPU (rollout " in out


def test_projection_arithmetic_on_hand_computed_numbers():
    # 1920 rollouts x (19 + 125) ids = 276480 ids per run; at 4608 ids/s rollout: 60 s, at
    # 27648 ids/s update: 10 s; 10 runs 2 at a time: 5 x 70 s = 350 s = 5.8333 min
    p = bench.project_main_job(4608.0, 27648.0, 1920, 19, 125, runs=10, jobs=2)
    assert p["rollout_s"] == pytest.approx(60.0)
    assert p["update_s"] == pytest.approx(10.0)
    assert p["minutes"] == pytest.approx(350 / 60)


def test_the_main_jobs_shape_is_read_from_its_preset():
    # configs/experiment/compare_small.yaml: budget.amount 1280, seeds 0-4 x {grpo, ppo}; joblib n_jobs 2
    assert bench.main_job_shape() == {"rollouts": 1280.0, "runs": 10, "jobs": 2}
