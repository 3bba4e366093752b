"""From a validated ``TrainConfig`` to the objects a run uses: envs, rollout engines, models.

Every entry point (train, warm start, benchmarks) builds through these functions, so an env
knob, the compression wrapper, the policy shape or the start checkpoint means the same thing
everywhere:

- :func:`env_kwargs` / :func:`compression_kwargs` / :func:`make_env`: the env constructor kwargs
  (training, or evaluation = training kwargs updated with ``eval.env_kwargs``), the compression
  wrapper's kwargs (``None`` for ``strategy=none``) and one env built from them;
  :func:`check_env` builds both once during validation (a ``ValueError`` of the constructors
  becomes a one-line ``ConfigError``).
- :func:`train_engine` / :func:`eval_engine`: ``RolloutEngine`` for training rollouts (at
  ``rollout.temperature``) and for evaluation (at ``eval.temperature``, eval kwargs).
- :func:`policy_shape`, :func:`build_policy` (policy, critic, frozen reference, from a start
  checkpoint), :func:`load_policy_weights`, :func:`start_model` (the cached warm start, a path or
  random init).
- Seeds: :func:`mix_seed` (all randomness of a run derives from ``(seed, update index, stream)``),
  :func:`eval_seed`, :func:`update_requests` (the rollout requests of update ``u``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import torch

from experiments.config import ConfigError, TrainConfig, resolve_critic


# --------------------------------------------------------------------------------------------- seeds
def mix_seed(*parts: int) -> int:
    """A deterministic 31-bit seed from integers (run seed, update index, stream id)."""
    h = hashlib.sha256(",".join(str(int(p)) for p in parts).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def eval_seed(c: TrainConfig) -> int:
    """Evaluation seeds depend only on the run seed: every method is evaluated on the same
    held-out tasks with the same env seeds (``seed_eval_seed(c.seed)``)."""
    return seed_eval_seed(c.seed)


def start_eval_seed(c: TrainConfig) -> int:
    """The start model's evaluation seed (at the warm-start build): ``seed_eval_seed`` of
    ``warmstart.seed``, never of the run seed. The cached start success is shared by the runs of
    every seed, so it must not depend on which run happened to build the cache first; with
    ``warmstart.seed = 0`` it is measured on exactly the episodes seed 0's runs are evaluated on."""
    return seed_eval_seed(c.warmstart.seed)


def seed_eval_seed(seed: int) -> int:
    """The evaluation seed of run seed ``seed``."""
    return (seed * 7_919 + 424_242) % (2**31 - 1)


def rollouts_per_update(c: TrainConfig) -> int:
    """``algo.tasks_per_update * algo.group_size`` training rollouts per update."""
    return c.algo.tasks_per_update * c.algo.group_size


def update_requests(c: TrainConfig, update: int) -> list:
    """The training rollout requests of update ``update`` (0-based): ``tasks_per_update`` train
    tasks drawn from ``range(env.train_tasks)``, ``group_size`` rollouts each; a function of
    ``(seed, update)`` only, so a resumed run draws exactly what an uninterrupted one would."""
    from algos.rollout import make_requests

    rng = torch.Generator().manual_seed(mix_seed(c.seed, update, 1))
    return make_requests(c.algo.tasks_per_update, c.algo.group_size, seed=mix_seed(c.seed, update, 2),
                         split="train", n_task_pool=c.env.train_tasks, rng=rng)


def sampling_generator(c: TrainConfig, update: int) -> torch.Generator:
    """The token-sampling generator of update ``update``'s training rollouts."""
    return torch.Generator().manual_seed(mix_seed(c.seed, update, 3))


# --------------------------------------------------------------------------------------------- envs
def env_kwargs(c: TrainConfig, evaluation: bool = False) -> dict:
    """Env constructor kwargs: ``env.kwargs``, updated with ``eval.env_kwargs`` for evaluation."""
    kw = dict(c.env.kwargs)
    if evaluation:
        kw.update(dict(c.eval.env_kwargs))
    return kw


def compression_kwargs(c: TrainConfig) -> dict | None:
    """Kwargs of the ``ContextCompression`` wrapper, or ``None`` for ``compression.strategy=none``
    (an unset ``every_turns`` is left out so the wrapper's own default applies)."""
    comp = asdict(c.compression)
    if comp["strategy"] == "none":
        return None
    if comp.get("every_turns") is None:
        comp.pop("every_turns")
    return comp


def make_env(c: TrainConfig, evaluation: bool = False):
    """One env of this config (wrapped in the compression wrapper when one is configured)."""
    import envs

    return envs.make(c.env.id, compression=compression_kwargs(c), **env_kwargs(c, evaluation))


def check_env(c: TrainConfig) -> None:
    """Build the env once per kwargs set (``env.kwargs``, then with ``eval.env_kwargs``, then inside
    the compression wrapper): the constructors and the wrapper validate their kwargs eagerly; their
    error becomes a one-line ``ConfigError`` naming the config field."""
    import gymnasium

    import envs
    from experiments.config import is_pair_run

    if is_pair_run(c):  # a two-agent env (no gymnasium registration, no compression wrapper)
        for where, kwargs in (("env.kwargs", env_kwargs(c)), ("eval.env_kwargs", env_kwargs(c, evaluation=True))):
            try:
                envs.make_multi_agent(c.env.id, **kwargs)
            except (ValueError, TypeError) as e:
                raise ConfigError(f"{where} of env {c.env.id}: " + " ".join(str(e).split())) from None
        return
    steps = [("env.kwargs", env_kwargs(c), None)]
    if c.eval.env_kwargs:
        steps.append(("eval.env_kwargs", env_kwargs(c, evaluation=True), None))
    if compression_kwargs(c) is not None:
        steps.append(("compression", env_kwargs(c), compression_kwargs(c)))
    for where, kwargs, compression in steps:
        try:
            envs.make(c.env.id, compression=compression, **kwargs).close()
        except (ValueError, TypeError, gymnasium.error.Error) as e:
            raise ConfigError(f"{where} of env {c.env.id}: " + " ".join(str(e).split())) from None


def train_engine(c: TrainConfig, num_envs: int | None = None):
    """``RolloutEngine`` for training rollouts: ``min(rollout.num_envs, rollouts per update)``
    envs (or ``num_envs``), sampling at ``rollout.temperature``."""
    from algos.rollout import RolloutEngine

    n = num_envs if num_envs is not None else min(c.rollout.num_envs, rollouts_per_update(c))
    return RolloutEngine(c.env.id, num_envs=n, max_len=c.policy.max_len, max_action_tokens=c.rollout.max_action_tokens,
                         temperature=c.rollout.temperature, env_kwargs=env_kwargs(c), compression=compression_kwargs(c))


def eval_engine(c: TrainConfig, episodes: int, max_envs: int | None = None):
    """``RolloutEngine`` for evaluation: eval env kwargs, ``eval.temperature``, at most
    ``max_envs`` (default ``rollout.num_envs``) envs for ``episodes`` episodes."""
    from algos.rollout import RolloutEngine

    n = min(max_envs if max_envs is not None else c.rollout.num_envs, episodes)
    return RolloutEngine(c.env.id, num_envs=max(1, n), max_len=c.policy.max_len,
                         max_action_tokens=c.rollout.max_action_tokens, temperature=c.eval.temperature,
                         env_kwargs=env_kwargs(c, evaluation=True), compression=compression_kwargs(c))


# --------------------------------------------------------------------------------------------- models
def policy_shape(c: TrainConfig, critic: str = "none"):
    """``PolicyShape`` of ``policy.*`` over the shared vocabulary, with critic kind ``critic``."""
    from algos.policy import PolicyShape
    from envs.tokenizer import get_tokenizer

    p = c.policy
    return PolicyShape(vocab_size=get_tokenizer().vocab_size, d_model=p.d_model, n_layers=p.n_layers,
                       n_heads=p.n_heads, max_len=p.max_len, mlp_ratio=p.mlp_ratio, critic=critic)


def load_policy_weights(model, path: str) -> None:
    """Load a policy checkpoint (``{"policy": state}`` or a bare state dict) into ``model``; a
    missing value head is allowed (it starts fresh), any other mismatch is a ``ValueError``."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    state = state.get("policy", state)
    missing, unexpected = model.load_state_dict(state, strict=False)
    bad = [k for k in missing if not k.startswith("value_head")]
    if bad or unexpected:
        raise ValueError(f"checkpoint {path} does not match the policy shape: missing {bad}, unexpected {list(unexpected)}")


def start_model(c: TrainConfig) -> dict:
    """The start checkpoint of a run: ``{"path", "success", "extra"}``. ``policy.init_checkpoint``
    ``warmstart`` = the cached behaviour-cloning warm start (built when missing); a path (its
    success read from a ``warmstart.json`` beside it when there is one); ``""`` = random init."""
    extra: dict = {}
    if c.policy.init_checkpoint == "warmstart":
        from experiments.warmstart import ensure_warmstart

        ws = ensure_warmstart(c)
        if "eval_train/success" in ws.get("start_eval", {}):
            extra["start_model/train_split_success"] = ws["start_eval"]["eval_train/success"]
        return {"path": ws["path"], "success": ws["start_success"], "extra": extra}
    if c.policy.init_checkpoint:
        info = Path(c.policy.init_checkpoint).with_name("warmstart.json")
        success = json.loads(info.read_text())["start_success"] if info.exists() else float("nan")
        return {"path": c.policy.init_checkpoint, "success": success, "extra": extra}
    return {"path": "", "success": float("nan"), "extra": extra}


def build_policy(c: TrainConfig, start_path: str = ""):
    """``(policy, critic | None, reference | None)``: models of ``policy_shape(c, resolve_critic(c))``
    initialised from ``policy.init_seed``, the policy loaded from ``start_path`` when given (a
    separate critic starts from the start model's trunk), and a frozen copy of the start policy as
    the KL reference when ``algo.kl_coef > 0``."""
    from algos.policy import build_models
    from algos.trainer import frozen_copy

    policy, critic = build_models(policy_shape(c, critic=resolve_critic(c)), seed=c.policy.init_seed)
    if start_path:
        load_policy_weights(policy, start_path)
        if critic is not None:
            critic.trunk.load_state_dict(policy.trunk.state_dict())
    reference = frozen_copy(policy) if c.algo.kl_coef > 0 else None
    return policy, critic, reference


__all__ = ["build_policy", "check_env", "compression_kwargs", "env_kwargs", "eval_engine", "eval_seed", "seed_eval_seed", "start_eval_seed",
           "load_policy_weights", "make_env", "mix_seed", "policy_shape", "rollouts_per_update", "sampling_generator",
           "start_model", "train_engine", "update_requests"]
