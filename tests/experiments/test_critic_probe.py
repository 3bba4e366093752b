"""experiments.critic_probe: the Monte Carlo targets at the decision points, the fit, the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from algos.critic_points import PointData
from experiments.critic_probe import build_critic, main, probe, sample
from experiments.runtime.config import register_configs, validate

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
register_configs()
torch.set_num_threads(1)


def _config(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return validate(compose(config_name="config", overrides=[
            "experiment=learn_tiny", "algo=ppo", "algo.value_level=turn", f"warmstart.cache_dir={tmp_path}",
            "run_dir=unused", *overrides]))


@pytest.fixture(scope="module")
def tutorial(shared_warmstart_cache):
    c = _config(shared_warmstart_cache)
    critic, policy = build_critic(c)
    return c, critic, sample(c, policy, 24, 11)


@pytest.mark.slow
def test_turn_points_and_monte_carlo_returns_match_the_trajectories(tutorial):
    """Outcome reward, gamma 1: every decision point's return is the episode's training reward (it
    arrives on the last turn), and turn level has one point per turn of the trajectory."""
    c, _, trajs = tutorial
    assert c.algo.gamma == 1.0
    data = PointData(trajs, "turn", 1.0)
    m = data.layout.mask
    assert any(t.train_reward > 0 for t in trajs) and any(t.train_reward == 0 for t in trajs)
    for i, t in enumerate(trajs):
        assert int(m[i].sum()) == t.turns
        assert torch.all(data.returns[i][m[i]] == float(t.train_reward))


@pytest.mark.slow
def test_the_fit_ev_rises_on_the_fitted_set(tutorial):
    """A fit on set A must raise set A's EV from the fresh critic's (a probe that cannot fit would
    measure nothing); step 0 and the last step are always reported."""
    c, _, _ = tutorial
    rows, info = probe(c, rollouts=24, steps=30, lr=3e-3, batch=24, every=30)
    assert [r.step for r in rows] == [0, 30]
    assert rows[1].fit_ev > rows[0].fit_ev + 0.05, rows
    assert info["points_a"] > 24 and 0 < info["success_a"] < 1


@pytest.mark.parametrize("argv, message", [(["--rollouts", "0"], "--rollouts=0 invalid"),
                                          (["--lr", "-1"], "--lr=-1.0 invalid")])
def test_bad_arguments_are_one_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err
