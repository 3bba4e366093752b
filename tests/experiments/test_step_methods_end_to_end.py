"""The step-level estimators from the one training entry point, on both envs:
``experiments.train algo=rloo|gigpo|grpo_process|grouped_value env=bugfix|long_horizon experiment=tiny``
(in-process ``experiments.runtime.loop.run`` on the composed, validated config, as ``main`` does after
the Hydra parse)."""

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from algos.metric_keys import undeclared
from experiments.runtime.config import register_configs, validate
from experiments.runtime.loop import run

ROOT = Path(__file__).resolve().parents[2]
register_configs()
# tiny: 2 updates of 4 tasks x G = 4 (16 rollouts each: 4 groups per update), a 2 x 2 evaluation
TINY = ["experiment=tiny", "budget.amount=32", "algo.group_size=4", "algo.tasks_per_update=4", "eval.tasks=2",
        "warmstart.eval_tasks=2"]


def train(tmp_path, *overrides) -> tuple[dict, list[dict]]:
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        composed = compose(config_name="config", overrides=[*TINY, *overrides, f"run_dir={tmp_path / 'run'}",
                                                           f"warmstart.cache_dir={tmp_path.parent / 'ws'}"])
    summary = run(validate(composed), resolved=OmegaConf.to_container(composed, resolve=True))
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    return summary, rows


@pytest.mark.slow
@pytest.mark.parametrize("env", ["bugfix", "long_horizon"])
@pytest.mark.parametrize("algo", ["rloo", "gigpo", "grpo_process", "grouped_value"])
def test_step_method_trains_end_to_end(tmp_path, algo, env):
    summary, rows = train(tmp_path, f"algo={algo}", f"env={env}")
    # 32 rollouts at 4 tasks x G = 4 per update: 2 updates, every one of this algorithm
    assert summary["compute/rollouts"] == 32 and [r["update"] for r in rows] == [1, 2]
    assert all(r["algo"] == algo and r["train/grad_norm"] >= 0 for r in rows)
    assert 0.0 <= summary["eval/success"] <= 1.0
    assert undeclared([*summary, *(k for r in rows for k in r)]) == []  # the metric contract knows every key
    if algo in ("gigpo", "grouped_value"):
        # the envs emit info["state_key"]: the reset state is shared by every member of a group,
        # so step groups exist (4 groups' reset steps at least) and the hit rate is above 0
        assert all(r["train/step_groups"] >= 4 and 0.0 < r["train/anchor_hit_rate"] <= 1.0 for r in rows)
    if algo == "grouped_value":  # the held-out value quality is logged every update (null: constant returns)
        assert all("train/state_value_ev_heldout" in r for r in rows)
    if algo == "grpo_process":
        # outcome rewards only (both envs' default): the scored steps are the last turns alone
        assert all(0.0 < r["train/scored_step_frac"] <= 1.0 for r in rows)
