"""``build_policy``: a separate critic of the policy's width and depth starts from the start model's
trunk; a critic of its own width or depth (``policy.critic_d_model`` / ``critic_n_layers``) cannot
hold that trunk and starts from ``policy.init_seed`` instead."""

from __future__ import annotations

import torch

from experiments.runtime.build import build_policy
from experiments.runtime.config import compose_config, validate

PPO_TINY = ("experiment=tiny", "algo=ppo", "policy.critic=separate")


def _start_checkpoint(c, path) -> dict:
    """A start checkpoint unlike the seed's init: every policy weight shifted by +1."""
    policy, _, _ = build_policy(c)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(1.0)
    torch.save({"policy": policy.state_dict()}, path)
    return policy.trunk.state_dict()


def test_a_critic_of_the_policys_shape_starts_from_the_start_models_trunk(tmp_path):
    c = validate(compose_config(list(PPO_TINY)))
    trunk = _start_checkpoint(c, tmp_path / "policy.pt")
    _, critic, _ = build_policy(c, str(tmp_path / "policy.pt"))
    for name, value in critic.trunk.state_dict().items():
        torch.testing.assert_close(value, trunk[name], rtol=0, atol=0)


def test_a_critic_of_its_own_shape_starts_from_the_init_seed(tmp_path):
    c = validate(compose_config([*PPO_TINY, "policy.critic_d_model=32", "policy.critic_n_layers=3"]))
    _start_checkpoint(c, tmp_path / "policy.pt")
    _, critic, _ = build_policy(c, str(tmp_path / "policy.pt"))  # a 64-wide trunk would not load into it
    _, fresh, _ = build_policy(c)
    assert (critic.shape.d_model, len(critic.trunk.blocks)) == (32, 3)
    for (name, value), other in zip(critic.state_dict().items(), fresh.state_dict().values()):
        torch.testing.assert_close(value, other, rtol=0, atol=0, msg=name)
