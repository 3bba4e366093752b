"""Structured configs (Hydra / OmegaConf dataclasses) for training: one home per knob.

Every knob is declared once, with its default and a comment; ``configs/<group>/*.yaml`` state only
what an option changes. ``configs/config.yaml`` composes one YAML per group (env, algo, policy,
compression, budget, logger, rollout, eval, warmstart) on top of the ``train_schema`` node
(``experiments.runtime.config.register_configs``). The groups' schemas are declared here, except
the algo group's: one schema per algorithm, a dataclass next to its trainer in ``algos/``
(``algos.configs.AlgoConfig``, ``algos.grpo.GrpoConfig``, ``algos.ppo.PpoConfig``, ...) registered
with it (``@register(name, config=...)``); :data:`ALGO_SCHEMAS` is read from that registry and the
classes are re-exported here. A GRPO config has no ``gamma`` and a PPO config no ``std``, so a
misspelt or foreign key is a composition error.

Each dataclass checks its own fields in ``__post_init__`` and :class:`TrainConfig` the combinations
across groups, raising :class:`ConfigError` (``algos.configs.ConfigError``) with ONE line that says
what is wrong, why, and what is allowed (loading and the env check: :mod:`experiments.runtime.config`).

Fields marked ``operational`` (``field(metadata=OPERATIONAL)``) change where and how a run is
written or shown, never its numbers; :func:`fingerprint` (the run-directory hash, the warm-start
cache key) leaves them out.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Optional

from omegaconf import MISSING

from algos.compute import BUDGET_KINDS
from algos.configs import AlgoConfig, ConfigError, algo_schema, check_at_least, check_choice
from algos.gigpo import GigpoConfig
from algos.grpo import GrpoConfig
from algos.grpo_process import GrpoProcessConfig
from algos.ppo import PpoConfig, PpoLongConfig, PpoSegmentTerminalConfig
from algos.ppo_ctde import PpoCtdeConfig, PpoIndependentConfig
from algos.registry import TrainerTraits, config_schemas, trainers_with
from algos.rloo import RlooConfig
from envs import BUGFIX, SPECS
from envs.compression import STRATEGIES, TRIGGERS, CompressionSettings
from envs.pairfix import AGENTS as PAIR_AGENTS

#: ``env.name`` choices: the short name of every env spec (``envs.SPECS``)
ENV_NAMES = tuple(s.name for s in SPECS)
#: two-agent envs (specs with ``agents == 2``, run by experiments/runtime/pair.py) and the algorithms that train them
PAIR_ENVS = tuple(s.name for s in SPECS if s.agents == 2)
PAIR_ALGOS = trainers_with(agents=2)


def method_envs(traits: TrainerTraits) -> tuple[str, ...]:
    """The ``env.name`` values a trainer with ``traits`` runs on, in ``envs.SPECS`` order: every env
    spec with its number of agents that, when it reads per-step rewards, pays them (a non-empty
    ``step_reward_modes``)."""
    return tuple(s.name for s in SPECS
                 if s.agents == traits.agents and (s.step_reward_modes or not traits.step_rewards))


CRITIC_CHOICES = ("auto", "none", "head", "separate")
POLICY_KINDS = ("tiny", "hf")
#: the tiny policy's action budget in words (rollout.max_action_tokens unset)
TINY_ACTION_TOKENS = 12
#: one-agent algorithms that train a critic (policy.critic=auto gives them one)
CRITIC_ALGOS = trainers_with(critic=True, agents=1)
HF_DTYPES = ("auto", "float32", "bfloat16", "float16")
LOGGER_KINDS = ("wandb", "none")
EVAL_SPLITS = ("train", "heldout")
WARMSTART_AGENTS = ("noisy_oracle",)
#: field metadata of knobs that never change a run's numbers (left out of :func:`fingerprint`)
OPERATIONAL = {"operational": True}


@dataclass
class EnvConfig:
    # short name: an envs.SPECS name (bugfix | long_horizon | long_horizon_v3 | pairfix): selects the
    # env's spec (its demo agent, one or two agents); names the run directory
    name: str = BUGFIX.name
    # the env's id (its spec's id; configs/env/<name>.yaml states both)
    id: str = BUGFIX.id
    # keyword arguments of the env constructor (difficulty, reward mode, fault rates, ...)
    kwargs: dict[str, Any] = field(default_factory=dict)
    # train tasks are task_index in [0, train_tasks) on split "train"
    train_tasks: int = 64

    def __post_init__(self) -> None:
        check_choice("env.name", self.name, ENV_NAMES)
        check_at_least("env.train_tasks", self.train_tasks, 1)


@dataclass
class CompressionConfig(CompressionSettings):
    """The ``compression`` group: the wrapper's settings, whose knobs, defaults and comments are
    declared once in ``envs.compression.CompressionSettings``; the strategy and trigger names are
    checked here, the other values when the wrapper is built (``experiments.runtime.config.check_env``)."""

    def __post_init__(self) -> None:
        check_choice("compression.strategy", self.strategy, list(STRATEGIES))
        check_choice("compression.trigger", self.trigger, TRIGGERS)


@dataclass
class PolicyConfig:
    # tiny: algos.policy.PolicyModel over the word vocabulary (the shape knobs below);
    # hf: a Hugging Face causal LM and its chat template (policy=hf; the hf knobs below)
    kind: str = "tiny"
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    # context window of one segment (tokens)
    max_len: int = 512
    mlp_ratio: int = 4
    # auto: none for GRPO, separate for PPO (tiny) / head for PPO (hf), separate for the two-agent
    # trainers (any policy); or none | head | separate
    critic: str = "auto"
    # a separate critic's trunk width and depth (null = the policy's d_model / n_layers)
    critic_d_model: Optional[int] = None
    critic_n_layers: Optional[int] = None
    # checkpoint to start from: "warmstart" = the cached behaviour-cloning warm start of this
    # config's warmstart group; a path; or "" = random init (tests only)
    init_checkpoint: str = "warmstart"
    # seed of the random initialisation (before a checkpoint is loaded)
    init_seed: int = 0
    # hf: a local model directory (with config.json) or a hub id "owner/name"
    path: str = ""
    # hf: auto = bfloat16 on CUDA (when supported), float32 on CPU; or float32 | bfloat16 | float16
    dtype: str = "auto"
    # hf: auto = cuda when present, else cpu; or cpu | cuda | cuda:N
    device: str = "auto"
    # hf: the token that ends an assistant turn ("" = the tokenizer's eos_token)
    end_token: str = ""
    # hf: start the system message with the env's tools and action grammar (envs.instructions:
    # the env spec's text for a model that has never seen the env); false = no env text
    env_instructions: bool = False
    # hf: system message rendered before the task, after the env's instructions ("" = none)
    system_prompt: str = ""
    # hf: LoRA adapters through peft (lora_r = 0: none, every weight trains)
    lora_r: int = 0
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    # "all-linear" or comma-separated module names (e.g. q_proj,v_proj)
    lora_targets: str = "all-linear"
    # the most padded token positions (rows x the longest row) one forward and its backward hold:
    # behaviour cloning's and the update's micro-batches (beside their row caps) and the update's
    # no-grad passes; it bounds the activation memory, never changes the loss (null = rows only).
    # The run estimates its peak memory from it before any compute (experiments.runtime.memory).
    micro_batch_tokens: Optional[int] = None
    # the most token positions the sampling cache may hold: the rollout engines run at most
    # sample_tokens // cache_columns(max_len) rows at once (experiments.runtime.build
    # sampling_rows; at least one), which bounds the keys and values sampling keeps (null =
    # rollout.num_envs rows)
    sample_tokens: Optional[int] = None
    # hf: sampling computes the ids that fresh rows share at their start (the system prompt, a
    # group's first observation) once and copies their keys and values into each row
    shared_prefix: bool = True

    def __post_init__(self) -> None:
        check_choice("policy.kind", self.kind, POLICY_KINDS)
        check_choice("policy.critic", self.critic, CRITIC_CHOICES)
        if self.d_model % self.n_heads:
            raise ConfigError(f"policy.d_model={self.d_model} must be divisible by policy.n_heads={self.n_heads}")
        if self.init_checkpoint not in ("", "warmstart") and not os.path.exists(self.init_checkpoint):
            raise ConfigError(f"policy.init_checkpoint={self.init_checkpoint!r} does not exist "
                              "(use a path, 'warmstart' or '')")
        if self.critic_d_model is not None and (self.critic_d_model < 1 or self.critic_d_model % self.n_heads):
            raise ConfigError(f"policy.critic_d_model={self.critic_d_model} must be >= 1 and divisible by "
                              f"policy.n_heads={self.n_heads} (or null: the policy's width)")
        if self.critic_n_layers is not None and self.critic_n_layers < 1:
            raise ConfigError(f"policy.critic_n_layers={self.critic_n_layers} must be >= 1 (or null: the policy's depth)")
        check_choice("policy.dtype", self.dtype, HF_DTYPES)
        if not (self.device in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", self.device)):
            raise ConfigError(f"policy.device={self.device!r} is not a valid choice; allowed: auto, cpu, cuda, cuda:N")
        check_at_least("policy.lora_r", self.lora_r, 0)
        if self.micro_batch_tokens is not None:
            check_at_least("policy.micro_batch_tokens", self.micro_batch_tokens, 1)
        if self.sample_tokens is not None:
            check_at_least("policy.sample_tokens", self.sample_tokens, 1)
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"policy.lora_dropout={self.lora_dropout} must be in [0, 1)")
        if self.kind == "tiny":
            return
        if not self.path:
            raise ConfigError("policy.path is empty; policy=hf needs policy.path=<a local model directory or a hub id>")
        if not os.path.isdir(self.path) and not re.fullmatch(r"[\w.-]+/[\w.-]+", self.path):
            raise ConfigError(f"policy.path={self.path!r} is neither a directory nor a hub id (owner/name)")
        if os.path.isdir(self.path) and not os.path.isfile(os.path.join(self.path, "config.json")):
            raise ConfigError(f"policy.path={self.path!r} is not a Hugging Face model directory (no config.json)")


#: algorithm name -> its config schema, for every trainer registered with one
#: (``algos.registry.config_schemas``: ``@register(name, config=<Schema>)`` next to the trainer). The
#: ``algo`` Hydra group has one option per entry, and ``register_configs`` stores
#: ``algo/<name>_schema`` for each registered schema.
ALGO_SCHEMAS: dict[str, type[AlgoConfig]] = config_schemas()


#: ``rollout.mode``: one process, or a sampler process beside the trainer
ROLLOUT_MODES = ("sync", "async")
#: ``rollout.sampler_dtype``: the dtype of the sampling forward
SAMPLER_DTYPES = ("float32", "bfloat16")


@dataclass
class RolloutConfig:
    # env instances stepped in lockstep (one forward per generated token for all of them)
    num_envs: int = 64
    # sampling temperature (behavior log-probs are taken at it)
    temperature: float = 1.0
    # longest action in ids (then an env-written end id closes it); null = from the policy:
    # TINY_ACTION_TOKENS words for the tiny policy, for policy.kind=hf the longest warm-start demo
    # action in the model's tokenizer plus a margin (experiments.runtime.config.check_policy)
    max_action_tokens: Optional[int] = None
    # sample with the policy this many updates old (0 = the learner's current weights)
    staleness: int = 0
    # sync: collect, then update, in one process (a staleness k > 0 is then simulated with a
    # snapshot k updates old); async: a sampler process collects update t + 1 with the weights of
    # version t + 1 - k while the trainer computes update t (needs staleness >= 1)
    mode: str = "sync"
    # dtype of the sampling forward (the trainer stays float32): float32 | bfloat16
    sampler_dtype: str = "float32"

    def __post_init__(self) -> None:
        check_at_least("rollout.num_envs", self.num_envs, 1)
        if self.temperature <= 0:
            raise ConfigError(f"rollout.temperature={self.temperature} must be > 0 "
                              "(behavior log-probs are taken at this temperature)")
        if self.staleness < 0:
            raise ConfigError(f"rollout.staleness={self.staleness} must be >= 0 (0 = synchronous)")
        check_choice("rollout.mode", self.mode, ROLLOUT_MODES)
        check_choice("rollout.sampler_dtype", self.sampler_dtype, SAMPLER_DTYPES)
        if self.mode == "async" and self.staleness < 1:
            raise ConfigError(f"rollout.staleness={self.staleness} is invalid with rollout.mode=async; allowed: >= 1 "
                              "(the sampler collects update t + 1 with version t + 1 - staleness while update t trains)")
        if self.max_action_tokens is not None:
            check_at_least("rollout.max_action_tokens", self.max_action_tokens, 1)


@dataclass
class BudgetConfig:
    # what stops the run: rollouts | generated_tokens | tool_seconds | train_flops
    kind: str = "rollouts"
    amount: float = 1024
    # hard cap on updates whatever the budget (safety)
    max_updates: int = 100000

    def __post_init__(self) -> None:
        check_choice("budget.kind", self.kind, list(BUDGET_KINDS))
        if self.amount <= 0:
            raise ConfigError(f"budget.amount={self.amount} must be > 0")
        check_at_least("budget.max_updates", self.max_updates, 1)


@dataclass
class EvalConfig:
    # evaluate every N updates (and always at the end); 0 = only at the end
    every: int = 5
    split: str = "heldout"
    # held-out task instances (task_index 0..tasks-1)
    tasks: int = 40
    # test-time sampling budget: attempts per task (equal across methods)
    samples_per_task: int = 2
    temperature: float = 1.0
    # extra env kwargs for evaluation (e.g. fault injection for the recovery metric)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    # also evaluate on train-split tasks (in-distribution; metrics eval_train/*)
    train_split: bool = False

    def __post_init__(self) -> None:
        check_choice("eval.split", self.split, EVAL_SPLITS)
        check_at_least("eval.every", self.every, 0)
        check_at_least("eval.tasks", self.tasks, 1)
        check_at_least("eval.samples_per_task", self.samples_per_task, 1)
        if self.temperature < 0:
            raise ConfigError(f"eval.temperature={self.temperature} must be >= 0 (0 = greedy)")


@dataclass
class LoggerConfig:
    # wandb (offline: files under <run_dir>/wandb, nothing is sent) | none
    kind: str = "none"
    project: str = "agent-rl-harness"
    # sweep name shared by the runs of one comparison; run name (empty = run directory name)
    group: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        check_choice("logger.kind", self.kind, LOGGER_KINDS)


@dataclass
class WarmstartConfig:
    # scripted agent of envs.bugfix.agents that writes the demonstrations
    agent: str = "noisy_oracle"
    # its noise (the agent's mistake rate): sets the start success rate
    noise: float = 0.25
    # demonstration episodes (train split, task_index = i mod env.train_tasks)
    demos: int = 1000
    # passes over the demos, AdamW learning rate (linear warm-up then decay), rows per step
    epochs: int = 10
    lr: float = 2e-3
    batch_rows: int = 32
    # processes of behaviour cloning (experiments/runtime/bc.py: data parallel, the same loss up to float
    # summation order; in the cache key because the weights differ in the last bits)
    processes: int = 1
    # length-bucketed micro-batches (experiments/runtime/bc.py); false: one padded forward per minibatch
    # (the same loss; the weights differ in their last bits, so it is part of the cache key)
    bucketed: bool = True
    seed: int = 0
    # cache of warm-start checkpoints, keyed by a hash of everything that determines them
    cache_dir: str = field(default=".cache/agentrl/warmstart", metadata=OPERATIONAL)
    # start success is measured on this many held-out tasks x attempts
    eval_tasks: int = 40
    eval_samples_per_task: int = 2

    def __post_init__(self) -> None:
        check_choice("warmstart.agent", self.agent, WARMSTART_AGENTS)
        if not 0 <= self.noise <= 1:
            raise ConfigError(f"warmstart.noise={self.noise} must be in [0, 1]")
        for name in ("demos", "epochs", "batch_rows", "processes", "eval_tasks", "eval_samples_per_task"):
            check_at_least(f"warmstart.{name}", getattr(self, name), 1)
        if self.lr <= 0:
            raise ConfigError(f"warmstart.lr={self.lr} must be > 0")
        if not self.bucketed and self.processes > 1:
            raise ConfigError(f"warmstart.processes={self.processes} needs warmstart.bucketed=true; allowed with "
                              "bucketed=false: processes=1")


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    # the bare base schema: the algo group (algo=grpo | ppo) merges its own schema into it
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig, metadata=OPERATIONAL)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    warmstart: WarmstartConfig = field(default_factory=WarmstartConfig)
    # seed of everything random in the run (tasks, env seeds, sampling; eval seeds derive from it)
    seed: int = 0
    # run directory; empty = <runs_root>/<algo>-<env>-<hash of the config> (same command -> same dir)
    run_dir: str = field(default="", metadata=OPERATIONAL)
    runs_root: str = field(default="runs", metadata=OPERATIONAL)
    # resume from the run directory's last checkpoint when there is one
    resume: bool = field(default=True, metadata=OPERATIONAL)
    # torch threads (1 keeps parallel sweep jobs from fighting over cores)
    threads: int = field(default=1, metadata=OPERATIONAL)
    # tqdm progress bar (budget spent, success, throughput)
    progress: bool = field(default=True, metadata=OPERATIONAL)

    def __post_init__(self) -> None:
        """Combinations across groups (each group checked its own fields already)."""
        if self.rollout.max_action_tokens is None and self.policy.kind == "tiny":
            self.rollout.max_action_tokens = TINY_ACTION_TOKENS
        if self.algo.name == MISSING:
            return  # the bare schema before Hydra merges an algo option into it
        if self.algo.name in CRITIC_ALGOS and resolve_critic(self) == "none":
            raise ConfigError(f"algo={self.algo.name} needs a critic but policy.critic=none; allowed for PPO: head, separate "
                              "(or auto)")
        _check_pair_combination(self)
        if self.policy.kind == "hf" and self.policy.critic == "separate" and not is_pair_run(self):
            raise ConfigError("policy.critic='separate' is not available with policy.kind=hf on a one-agent env; "
                              "allowed: head, none (or auto: a value head on the LM's last hidden state for PPO)")
        sized = [f"policy.{k}={getattr(self.policy, k)}" for k in ("critic_d_model", "critic_n_layers")
                 if getattr(self.policy, k) is not None]
        if sized and resolve_critic(self) != "separate":
            raise ConfigError(f"{', '.join(sized)} sizes a separate critic but policy.critic resolves to "
                              f"{resolve_critic(self)!r}; allowed: policy.critic=separate (or auto with a critic algo)")
        if self.rollout.max_action_tokens is not None:  # else derived from the tokenizer by check_policy
            check_action_budget(self)


def check_action_budget(c: "TrainConfig") -> None:
    """``rollout.max_action_tokens`` (set) against the context window and the compression budget."""
    p, r = c.policy, c.rollout
    if r.max_action_tokens + 4 > p.max_len:
        raise ConfigError(f"rollout.max_action_tokens={r.max_action_tokens} must be in "
                          f"[1, policy.max_len - 4 = {p.max_len - 4}]")
    if c.compression.strategy != "none" and c.compression.budget_tokens + r.max_action_tokens + 64 > p.max_len:
        raise ConfigError(
            f"compression.budget_tokens={c.compression.budget_tokens} leaves no room in policy.max_len={p.max_len}: "
            f"need budget_tokens + max_action_tokens + 64 <= max_len (raise policy.max_len or lower the budget)")


def is_pair_run(c) -> bool:
    """A two-agent run (``env.name`` in ``PAIR_ENVS``): the run loop drives ``experiments.runtime.pair.TwoAgentLearner``."""
    return c.env.name in PAIR_ENVS


def _check_pair_combination(c: "TrainConfig") -> None:
    """Two-agent algorithms need a two-agent env and vice versa; the knobs a pair run reads."""
    pair_env, pair_algo = c.env.name in PAIR_ENVS, c.algo.name in PAIR_ALGOS
    if pair_algo and not pair_env:
        raise ConfigError(f"algo={c.algo.name} trains two agents but env={c.env.name} has one; allowed envs: "
                          f"{', '.join(PAIR_ENVS)} (or a single-agent algo: {', '.join(a for a in ALGO_SCHEMAS if a not in PAIR_ALGOS)})")
    if pair_env and not pair_algo:
        raise ConfigError(f"env={c.env.name} has two agents but algo={c.algo.name} trains one; allowed algos: "
                          f"{', '.join(PAIR_ALGOS)}")
    if not pair_env:
        return
    if any(a not in PAIR_AGENTS for a in c.algo.frozen):
        raise ConfigError(f"algo.frozen={list(c.algo.frozen)!r} is invalid; allowed: distinct agents of "
                          f"{', '.join(PAIR_AGENTS)}")
    if resolve_critic(c) != "separate":
        raise ConfigError(f"policy.critic={c.policy.critic!r} is invalid for algo={c.algo.name}; allowed: separate "
                          "(or auto): each agent's critic is its own model")
    if c.policy.init_checkpoint not in ("warmstart", ""):
        raise ConfigError(f"policy.init_checkpoint={c.policy.init_checkpoint!r} is not supported for env={c.env.name}; "
                          "allowed: warmstart (the cached pair warm start) or '' (random init)")
    if c.eval.temperature <= 0:
        raise ConfigError(f"eval.temperature={c.eval.temperature} is not supported for env={c.env.name}; allowed: > 0 "
                          "(pair episodes are sampled)")
    for name, value, allowed in (("compression.strategy", c.compression.strategy, "none"),
                                 ("budget.kind", c.budget.kind, "rollouts"), ("rollout.staleness", c.rollout.staleness, 0),
                                 ("rollout.mode", c.rollout.mode, "sync"),
                                 ("rollout.sampler_dtype", c.rollout.sampler_dtype, "float32"),
                                 ("algo.group_size", c.algo.group_size, 1), ("algo.kl_coef", c.algo.kl_coef, 0)):
        if value != allowed:
            raise ConfigError(f"{name}={value!r} is not supported for env={c.env.name}; allowed: {allowed!r} "
                              "(a two-agent run counts pair episodes, synchronously, without compression or KL)")


def resolve_critic(c) -> str:
    """``policy.critic`` with ``auto`` resolved: none for GRPO; for PPO a separate critic (tiny
    policy) or a value head on the LM (``policy.kind=hf``); for the two-agent algorithms a
    separate critic whatever the policy (each agent's critic is its own model)."""
    if c.policy.critic != "auto":
        return c.policy.critic
    if c.algo.name not in (*CRITIC_ALGOS, *PAIR_ALGOS):
        return "none"
    return "head" if getattr(c.policy, "kind", "tiny") == "hf" and c.algo.name not in PAIR_ALGOS else "separate"


def fingerprint(obj) -> dict:
    """The config as a plain dict without the operational fields (recursively): what determines
    a run's numbers. The run-directory hash and the warm-start cache key are built from it."""
    if is_dataclass(obj):
        return {f.name: fingerprint(getattr(obj, f.name)) for f in fields(obj) if not f.metadata.get("operational")}
    if isinstance(obj, dict):
        return {k: fingerprint(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [fingerprint(v) for v in obj]
    return obj


__all__ = ["ALGO_SCHEMAS", "AlgoConfig", "BudgetConfig", "CompressionConfig", "ConfigError", "ENV_NAMES",
           "EnvConfig", "EvalConfig", "GigpoConfig", "GrpoConfig", "GrpoProcessConfig", "LoggerConfig", "OPERATIONAL",
           "PAIR_AGENTS", "PAIR_ALGOS", "PAIR_ENVS", "PolicyConfig", "PpoConfig", "PpoCtdeConfig", "PpoIndependentConfig",
           "PpoLongConfig", "PpoSegmentTerminalConfig", "RlooConfig", "RolloutConfig", "TINY_ACTION_TOKENS",
           "TrainConfig", "WarmstartConfig", "algo_schema", "check_action_budget", "fingerprint", "is_pair_run",
           "method_envs", "resolve_critic"]
