"""From a validated ``TrainConfig`` to the objects a run uses: envs, rollout engines, models.

Every entry point (train, warm start, benchmarks) builds through these functions, so an env
knob, the compression wrapper, the policy shape or the start checkpoint means the same thing
everywhere:

- :func:`env_kwargs` / :func:`compression_settings` / :func:`make_env`: the env constructor kwargs
  (training, or evaluation = training kwargs updated with ``eval.env_kwargs``), the compression
  wrapper's kwargs (``None`` for ``strategy=none``) and one env built from them;
  ``experiments.runtime.config.check_env`` builds them once during validation.
- :func:`train_engine` / :func:`eval_engine`: ``RolloutEngine`` for training rollouts (at
  ``rollout.temperature``) and for evaluation (at ``eval.temperature``, eval kwargs).
- :func:`policy_shape`, :func:`new_policy` (the untrained policy of ``policy.kind``: the tiny
  ``PolicyModel`` or a Hugging Face ``HFPolicy``), :func:`build_policy` (policy, critic, frozen
  reference, from a start checkpoint), :func:`load_policy_weights` (the start checkpoint itself:
  ``experiments.runtime.warmstart.start_model``).
- Per-update draws: :func:`eval_seed`, :func:`update_requests` (the rollout requests of update
  ``u``), :func:`sampling_generator`; their streams are named in :mod:`experiments.runtime.seeds`.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial

import torch

import envs
from algos.backend import as_backend
from algos.hf_backend import LoraSpec, compact_width, load_policy
from algos.policy import PolicyModel, PolicyShape, build_models
from algos.requests import make_requests
from algos.rollout import RolloutEngine
from algos.trainer import frozen_copy
from envs.compression import CompressionSettings
from envs.tokenizer import get_tokenizer
from experiments.runtime.adapters import TRAINABLE, PolicyCheckpoint, frozen_keys
from experiments.runtime.schema import TrainConfig, resolve_critic
from experiments.runtime.seeds import EVAL, Stream, seed_eval_seed, stream_seed


# --------------------------------------------------------------------------------------------- seeds
def eval_seed(c: TrainConfig) -> int:
    """Evaluation seeds depend only on the run seed: every method is evaluated on the same
    held-out tasks with the same env seeds (``seed_eval_seed(c.seed)``)."""
    return seed_eval_seed(c.seed)


def start_eval_seed(c: TrainConfig) -> int:
    """The start model's evaluation seed (at the warm-start build): ``seed_eval_seed`` of
    ``warmstart.seed``, never of the run seed. The cached start success is shared by the runs of
    every seed, so it must not depend on which run happened to build the cache first; with
    ``warmstart.seed = 0`` it is measured on exactly the episodes seed 0's runs are evaluated on."""
    return EVAL(c.warmstart.seed)



def rollouts_per_update(c: TrainConfig) -> int:
    """``algo.tasks_per_update * algo.group_size`` training rollouts per update."""
    return c.algo.tasks_per_update * c.algo.group_size


def update_requests(c: TrainConfig, update: int) -> list:
    """The training rollout requests of update ``update`` (0-based): ``tasks_per_update`` train
    tasks drawn from ``range(env.train_tasks)``, ``group_size`` rollouts each; a function of
    ``(seed, update)`` only, so a resumed run draws exactly what an uninterrupted one would."""
    rng = torch.Generator().manual_seed(stream_seed(c.seed, update, stream=Stream.TASK_DRAW))
    return make_requests(c.algo.tasks_per_update, c.algo.group_size, seed=stream_seed(c.seed, update, stream=Stream.ENV_SEEDS),
                         split="train", n_task_pool=c.env.train_tasks, rng=rng)


def sampling_generator(c: TrainConfig, update: int) -> torch.Generator:
    """The token-sampling generator of update ``update``'s training rollouts."""
    return torch.Generator().manual_seed(stream_seed(c.seed, update, stream=Stream.SAMPLING))


# --------------------------------------------------------------------------------------------- envs
def env_kwargs(c: TrainConfig, evaluation: bool = False) -> dict:
    """Env constructor kwargs: ``env.kwargs``, updated with ``eval.env_kwargs`` for evaluation."""
    kw = dict(c.env.kwargs)
    if evaluation:
        kw.update(dict(c.eval.env_kwargs))
    return kw


def compression_settings(c: TrainConfig) -> CompressionSettings | None:
    """The ``ContextCompression`` wrapper's settings (the ``compression`` group, an
    ``envs.compression.CompressionSettings``), or ``None`` for ``compression.strategy=none``."""
    return None if c.compression.strategy == "none" else c.compression


def compression_key(c: TrainConfig) -> dict | None:
    """:func:`compression_settings` as the warm-start cache keys hold it: ``None``, or the settings'
    fields with an unset ``every_turns`` left out."""
    settings = compression_settings(c)
    if settings is None:
        return None
    return {k: v for k, v in asdict(settings).items() if not (k == "every_turns" and v is None)}


def make_env(c: TrainConfig, evaluation: bool = False):
    """One env of this config: a one-agent env (wrapped in the compression wrapper when one is
    configured), or for a spec of several agents its PettingZoo env (``envs.make_multi_agent``)."""
    if envs.spec_of(c.env.id).agents > 1:
        return envs.make_multi_agent(c.env.id, **env_kwargs(c, evaluation))
    return envs.make(c.env.id, compression=compression_settings(c), **env_kwargs(c, evaluation))


def cache_columns(window: int) -> int:
    """The most columns a sampling cache row holds for a context window of ``window`` ids: the
    cache compacts after a step that leaves it wider than ``compact_width(window)`` and one step
    appends at most ``window`` columns. Example: 32 -> (32 + 8 + 64) + 32 = 136."""
    return compact_width(window) + window


def sampling_rows(c: TrainConfig, rows: int | None = None) -> int:
    """The rows a rollout engine of this config samples at once: ``rows`` (default
    ``rollout.num_envs``), with ``policy.sample_tokens`` at most ``sample_tokens //
    cache_columns(max_len)`` of them (at least 1), so the sampling cache never holds more than
    ``sample_tokens`` positions. Example: 65536 tokens and a 1536-id window (3520 columns): 18."""
    rows = c.rollout.num_envs if rows is None else rows
    if c.policy.sample_tokens is None:
        return rows
    return max(1, min(rows, c.policy.sample_tokens // cache_columns(c.policy.max_len)))


def train_engine(c: TrainConfig, num_envs: int | None = None):
    """``RolloutEngine`` for training rollouts: ``min(rollout.num_envs, rollouts per update)``
    envs (or ``num_envs``), at most :func:`sampling_rows`, sampling at ``rollout.temperature``."""
    n = sampling_rows(c, min(c.rollout.num_envs, rollouts_per_update(c)) if num_envs is None else num_envs)
    return RolloutEngine(c.env.id, num_envs=n, max_len=c.policy.max_len, max_action_tokens=c.rollout.max_action_tokens,
                         temperature=c.rollout.temperature, env_kwargs=env_kwargs(c), compression=compression_settings(c),
                         make_env=partial(make_env, c))


def eval_engine(c: TrainConfig, episodes: int, max_envs: int | None = None):
    """``RolloutEngine`` for evaluation: eval env kwargs, ``eval.temperature``, at most
    ``max_envs`` (default ``rollout.num_envs``) envs for ``episodes`` episodes, at most
    :func:`sampling_rows`."""
    n = sampling_rows(c, min(max_envs if max_envs is not None else c.rollout.num_envs, episodes))
    return RolloutEngine(c.env.id, num_envs=max(1, n), max_len=c.policy.max_len,
                         max_action_tokens=c.rollout.max_action_tokens, temperature=c.eval.temperature,
                         env_kwargs=env_kwargs(c, evaluation=True), compression=compression_settings(c),
                         make_env=partial(make_env, c, True))


# --------------------------------------------------------------------------------------------- models
def policy_shape(c: TrainConfig, critic: str = "none"):
    """``PolicyShape`` of ``policy.*`` over the shared vocabulary, with critic kind ``critic``."""
    p = c.policy
    return PolicyShape(vocab_size=get_tokenizer().vocab_size, d_model=p.d_model, n_layers=p.n_layers,
                       n_heads=p.n_heads, max_len=p.max_len, mlp_ratio=p.mlp_ratio, critic=critic,
                       critic_d_model=p.critic_d_model, critic_n_layers=p.critic_n_layers)


def load_policy_weights(model, path: str, base_path: str = "") -> None:
    """Load a policy checkpoint (``{"policy": state}`` or a bare state dict) into ``model``; a
    missing value head is allowed (it starts fresh), any other mismatch is a ``ValueError``. A
    checkpoint of trainable tensors only (a LoRA run's ``last.pt``,
    ``experiments.runtime.adapters``) must name ``model``'s base (``base_path`` and the sha256 of
    its frozen entries) and loads its tensors; the frozen entries stay the base's."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    state = state.get("policy", state)
    frozen: set[str] = set()
    if state.get("format") == TRAINABLE:
        PolicyCheckpoint(model, base_path).check_base(state["base"])
        state, frozen = state["tensors"], set(frozen_keys(model))
    missing, unexpected = model.load_state_dict(state, strict=False)
    bad = [k for k in missing if not k.startswith("value_head") and k not in frozen]
    if bad or unexpected:
        raise ValueError(f"checkpoint {path} does not match the policy shape: missing {bad}, unexpected {list(unexpected)}")


def system_prompt(c: TrainConfig) -> str | None:
    """The system message of a Hugging Face policy: the env's instructions (``envs.instructions``)
    when ``policy.env_instructions``, then ``policy.system_prompt``, one per line; ``None`` when both
    are off. ``ValueError`` for an env without instructions."""
    parts = ([envs.instructions(c.env.name)] if c.policy.env_instructions else []) + \
        ([c.policy.system_prompt] if c.policy.system_prompt else [])
    return "\n".join(parts) or None


def hf_policy(c: TrainConfig, value_head: bool = False):
    """The ``HFPolicy`` of ``policy.path`` (``policy.kind=hf``) with this config's device, dtype,
    end token, system prompt, LoRA adapters (initialised from ``policy.init_seed``) and shared-prefix
    sampling (``policy.shared_prefix``)."""
    p = c.policy
    torch.manual_seed(p.init_seed)
    policy = load_policy(p.path, value_head=value_head, device=p.device, dtype=p.dtype, end_token=p.end_token or None,
                         system=system_prompt(c),
                         lora=LoraSpec(r=p.lora_r, alpha=p.lora_alpha, dropout=p.lora_dropout, targets=p.lora_targets))
    policy.share_prefix = p.shared_prefix
    return policy


def new_policy(c: TrainConfig):
    """The untrained policy of ``policy.kind`` without a critic (the warm start's model): the tiny
    ``PolicyModel`` of ``policy_shape(c)`` from ``policy.init_seed``, or ``hf_policy(c)``."""
    if c.policy.kind == "hf":
        return hf_policy(c)
    torch.manual_seed(c.policy.init_seed)
    return PolicyModel(policy_shape(c))


def policy_layout(policy):
    """The context layout (``algos.backend.ContextLayout``) a policy reads and writes."""
    return as_backend(policy).layout


def build_policy(c: TrainConfig, start_path: str = ""):
    """``(policy, critic | None, reference | None)``: models of ``policy_shape(c, resolve_critic(c))``
    initialised from ``policy.init_seed`` (``policy.kind=hf``: ``hf_policy``, with a value head
    when the critic is ``head``), the policy loaded from ``start_path`` when given (a separate
    critic of the policy's width and depth starts from the start model's trunk; one of its own
    ``policy.critic_d_model`` / ``critic_n_layers`` from ``policy.init_seed``), and a frozen copy
    of the start policy as the KL reference when ``algo.kl_coef > 0``."""
    if c.policy.kind == "hf":
        policy, critic = hf_policy(c, value_head=resolve_critic(c) == "head"), None
    else:
        policy, critic = build_models(policy_shape(c, critic=resolve_critic(c)), seed=c.policy.init_seed)
    if start_path:
        load_policy_weights(policy, start_path, c.policy.path if c.policy.kind == "hf" else "")
        if critic is not None and (critic.shape.d_model, critic.shape.n_layers) == (policy.shape.d_model,
                                                                                   policy.shape.n_layers):
            critic.trunk.load_state_dict(policy.trunk.state_dict())
    reference = frozen_copy(policy) if c.algo.kl_coef > 0 else None
    return policy, critic, reference


__all__ = ["build_policy", "hf_policy", "new_policy", "policy_layout", "compression_key", "compression_settings", "env_kwargs", "eval_engine", "eval_seed", "load_policy_weights",
           "make_env", "policy_shape", "rollouts_per_update", "sampling_generator", "start_eval_seed", "train_engine",
           "update_requests"]
