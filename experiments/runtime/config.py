"""Loading and validating a training config: the Hydra schemas, composition, validation.

:func:`register_configs` stores the schemas in Hydra's ConfigStore (``train_schema`` of
:mod:`experiments.runtime.schema`, and ``algo/<name>_schema`` for every trainer registered with a
config schema in ``algos.registry``); entry points call it from ``main`` before composing. :func:`compose_config` composes ``configs/config.yaml`` with
override strings the way ``python -m experiments.train`` does. :func:`validate` (the first thing
every entry point calls, before any model, env or file is touched) builds the typed object (which
runs every ``__post_init__``), then builds the env and its compression wrapper once
(:func:`check_env`) so bad constructor kwargs fail the same way, and checks a Hugging Face policy's
tokenizer and chat template and derives (or checks) its action budget in that tokenizer
(:func:`check_policy`): a :class:`ConfigError` of one line.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import gymnasium
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

import envs
from algos.hf_backend import load_layout, lora_target_problem
from algos.registry import config_schemas
from experiments.runtime.build import compression_settings, env_kwargs, system_prompt
from experiments.runtime.models import register_resolvers
from experiments.runtime.schema import ConfigError, TrainConfig, check_action_budget, is_pair_run
from experiments.runtime.warmstart import demo_actions

#: ids a Hugging Face policy's derived action budget allows beyond the longest demo action
#: (numbers one digit longer, a different argument; ``check_action_tokens``)
ACTION_TOKEN_MARGIN = 4
#: ``configs/`` of the repository (what ``@hydra.main(config_path="../configs")`` of experiments/train.py reads)
CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


def register_configs() -> None:
    """``train_schema`` (the root) and, in the ``algo`` group, ``<name>_schema`` for every trainer
    registered with a config schema (``algos.registry.config_schemas``; the node is the schema's
    default instance, whose ``name`` is the registered one), the ``${agentrl.model:NAME}``
    resolver of cached pretrained models (``experiments.runtime.models``) and the size resolvers
    of :data:`SIZE_RESOLVERS` (``${agentrl.max_len_for:N,...}`` and the tiny preset's batch)."""
    register_resolvers()
    for name, resolver in SIZE_RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    for name, schema in config_schemas().items():
        cs.store(group="algo", name=f"{name}_schema", node=schema())


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())


def to_object(cfg) -> TrainConfig:
    """A ``TrainConfig`` from a composed DictConfig or a (possibly mutated) ``TrainConfig``,
    rebuilt so that every ``__post_init__`` runs on the final values."""
    if not isinstance(cfg, (TrainConfig, DictConfig)):
        raise ConfigError(f"expected a TrainConfig or DictConfig, got {type(cfg).__name__}")
    try:
        node = OmegaConf.structured(cfg) if isinstance(cfg, TrainConfig) else cfg
        return OmegaConf.to_object(node)  # type: ignore[return-value]
    except ConfigError:
        raise
    except Exception as e:  # OmegaConf type / missing-value errors: keep them to one line
        cause = e.__cause__ or e.__context__
        while cause is not None and not isinstance(cause, ConfigError):  # a resolver's ConfigError, however wrapped
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(_one_line(e)) from None


def validate(cfg) -> TrainConfig:
    """The typed, validated config (``ConfigError``, one line, on the first problem): every
    group's ``__post_init__``, the cross-group checks, then the env and compression wrapper built
    once with these kwargs (their ``ValueError`` becomes a ``ConfigError``)."""
    c = to_object(cfg)
    check_env(c)
    check_policy(c)
    if isinstance(cfg, DictConfig):  # the derived budget, so the run's saved config states it
        with read_write(cfg), open_dict(cfg):
            cfg.rollout.max_action_tokens = c.rollout.max_action_tokens
    return c


def compose_config(overrides: Sequence[str] = (), return_hydra_config: bool = False) -> DictConfig:
    """``configs/config.yaml`` composed with Hydra ``overrides`` (schemas registered first), as
    ``python -m experiments.train <overrides>`` composes it; not yet validated. With
    ``return_hydra_config`` the ``hydra`` node too (its ``runtime.choices``: the option picked in
    each config group; its ``sweeper.params``: a preset's multirun sweep)."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra_config)


def max_len_for(episode_ids: int, env_name: str, kind: str, path: str, end_token: str | None,
                env_instructions: bool, system: str | None) -> int:
    """``policy.max_len`` that leaves ``episode_ids`` ids after the policy's fixed first-turn prefix
    (the policy's ``kind``, ``path``, ``end_token``, ``env_instructions`` and ``system_prompt`` on
    env ``env_name``): ``episode_ids`` for the tiny policy (no prefix), for a Hugging Face policy
    (``kind=hf``) plus the ids its chat template and system prompt take before the first
    observation (:func:`first_turn_ids`). A policy whose tokenizer does not load gets
    ``episode_ids``: its ``policy.path`` error is :func:`check_policy`'s to report. The tiny
    preset's window (configs/experiment/tiny.yaml) with every policy option."""
    if kind != "hf":
        return int(episode_ids)
    parts = SimpleNamespace(env=SimpleNamespace(name=env_name),
                            policy=SimpleNamespace(env_instructions=env_instructions, system_prompt=system))
    try:
        return first_turn_ids(str(path), end_token or None, system_prompt(parts)) + int(episode_ids)
    except (ValueError, OSError):
        return int(episode_ids)


def agents_of(env_name: str) -> int:
    """Agents of env ``env_name`` (``EnvSpec.agents``); 1 for a name no spec has (a one-agent run,
    as ``is_pair_run`` counts it; an unknown env is :func:`check_env`'s to report)."""
    try:
        return envs.spec_of(str(env_name)).agents
    except ValueError:
        return 1


def group_size_for(group_size: int, env_name: str) -> int:
    """``algo.group_size`` of every method on env ``env_name``: ``group_size`` rollouts per task on a
    one-agent env (so that methods of any default group size update on equal batches), 1 on a
    two-agent env (a pair run samples one pair episode per task)."""
    return int(group_size) if agents_of(env_name) == 1 else 1


def tasks_for(trajectories: int, env_name: str, group_size: int) -> int:
    """``algo.tasks_per_update`` that makes ``trajectories`` agent trajectories per update on env
    ``env_name`` at ``group_size`` rollouts per task: ``trajectories // (agents x group_size)``, at least 1."""
    return max(1, int(trajectories) // (agents_of(env_name) * int(group_size)))


def rollouts_for(updates: int, tasks_per_update: int, group_size: int) -> int:
    """Rollouts (pair episodes on a two-agent env) of ``updates`` updates of ``tasks_per_update``
    tasks x ``group_size``: the tiny preset's ``budget.amount`` (2 updates) and its
    ``rollout.num_envs`` (1 update: one env per rollout)."""
    return int(updates) * int(tasks_per_update) * int(group_size)


#: OmegaConf resolvers of sizes derived from the config's other values (configs/experiment/tiny.yaml)
SIZE_RESOLVERS = {"agentrl.max_len_for": max_len_for, "agentrl.group_size_for": group_size_for,
                  "agentrl.tasks_for": tasks_for, "agentrl.rollouts_for": rollouts_for}


@functools.lru_cache(maxsize=16)
def first_turn_ids(path: str, end_token: str | None, system: str | None) -> int:
    """Ids of the first turn of the Hugging Face model at ``path`` before any observation (its chat
    template with the system message ``system``; the tokenizer only, no weights)."""
    return len(load_layout(path, end_token, system).first("", 1 << 20)[0])


def check_env(c: TrainConfig) -> None:
    """Build the env once per kwargs set (``env.kwargs``, then with ``eval.env_kwargs``, then inside
    the compression wrapper): the constructors and the wrapper validate their kwargs eagerly; their
    error becomes a one-line ``ConfigError`` naming the config field."""
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
    if compression_settings(c) is not None:
        steps.append(("compression", env_kwargs(c), compression_settings(c)))
    for where, kwargs, compression in steps:
        try:
            envs.make(c.env.id, compression=compression, **kwargs).close()
        except (ValueError, TypeError, gymnasium.error.Error) as e:
            raise ConfigError(f"{where} of env {c.env.id}: " + " ".join(str(e).split())) from None


def check_policy(c: TrainConfig) -> None:
    """``policy.kind=hf``: load the model's tokenizer and config (not its weights) and check its
    chat template and end-of-turn token (``algos.hf_backend.load_layout``) and, with LoRA, that
    the target modules exist (``lora_target_problem``, on the meta device), derive or check the
    action budget in its tokenizer (``check_action_tokens``) and that the first turn's template
    and system prompt leave room in ``policy.max_len``; a problem becomes a one-line
    ``ConfigError`` naming the fields. The tiny policy needs no check."""
    if c.policy.kind != "hf":
        return
    p = c.policy
    try:
        system = system_prompt(c)
    except ValueError as e:
        raise ConfigError(f"policy.env_instructions=true: {e}") from None
    try:
        layout = load_layout(p.path, p.end_token or None, system)
    except (ValueError, OSError) as e:
        hub = "" if Path(p.path).is_dir() else " (a hub id loads only with a network or from the local Hugging Face cache)"
        raise ConfigError(f"policy.path={p.path!r} (end_token={p.end_token!r}){hub}: " + " ".join(str(e).split())) from None
    problem = lora_target_problem(p.path, p.lora_targets) if p.lora_r > 0 else None
    if problem:
        raise ConfigError(f"policy.lora_targets={p.lora_targets!r}: {problem}")
    check_action_tokens(c, layout)
    head = len(layout.first("", p.max_len)[0]) + c.rollout.max_action_tokens + 2
    if head > p.max_len:
        raise ConfigError(f"policy.max_len={p.max_len} is too small for policy.path={p.path!r} with its system prompt: "
                          f"the first turn renders to {head - c.rollout.max_action_tokens - 2} ids before any observation; "
                          f"need policy.max_len >= {head} (with rollout.max_action_tokens={c.rollout.max_action_tokens})")


def check_action_tokens(c: TrainConfig, layout) -> None:
    """``rollout.max_action_tokens`` of a Hugging Face policy, from the longest action of the warm
    start's demonstrations in the model's tokenizer (``n`` ids before the end id): unset (null) it
    becomes ``n + ACTION_TOKEN_MARGIN``; set below ``n`` with ``policy.init_checkpoint=warmstart``
    it is a ``ConfigError`` (the warm start could not lay that demo out); then the budget's
    window checks (``check_action_budget``)."""
    r = c.rollout
    n, action = max(((len(layout.action_ids(a)) - 1, a) for a in demo_actions(c)), default=(0, ""))
    need = n + ACTION_TOKEN_MARGIN
    if r.max_action_tokens is None:
        r.max_action_tokens = need
    elif r.max_action_tokens < n and c.policy.init_checkpoint == "warmstart":
        raise ConfigError(f"rollout.max_action_tokens={r.max_action_tokens} is below the longest warm-start demo action "
                          f"in the tokenizer of policy.path={c.policy.path!r} ({action!r}: {n} tokens); allowed: >= {n}, "
                          f"or null for {need} (the longest plus {ACTION_TOKEN_MARGIN})")
    check_action_budget(c)


__all__ = ["ACTION_TOKEN_MARGIN", "CONFIG_DIR", "SIZE_RESOLVERS", "agents_of", "check_action_tokens", "check_env",
           "check_policy", "compose_config", "first_turn_ids", "group_size_for", "max_len_for", "register_configs",
           "rollouts_for", "tasks_for", "to_object", "validate"]
