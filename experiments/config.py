"""Structured configs (Hydra / OmegaConf dataclasses) for training, and their validation.

``configs/config.yaml`` composes one YAML per group (env, algo, policy, compression, budget,
logger, rollout, eval, warmstart) on top of the ``train_schema`` node registered here, so every
field is typed and a misspelt key is an error. ``validate(cfg)`` runs at the very start of
``experiments/train.py`` (before any model, env or file is touched) and raises ``ConfigError``
with ONE line that says what is wrong, why, and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING, DictConfig, OmegaConf

ENV_IDS = {"bugfix": "agentrl/BugFix-v1", "long_horizon": "agentrl/LongHorizon-v1"}
CRITIC_CHOICES = ("auto", "none", "head", "separate")
LOGGER_KINDS = ("wandb", "none")


class ConfigError(ValueError):
    """A one-line explanation of an invalid configuration."""


@dataclass
class EnvConfig:
    # short name: bugfix | long_horizon
    name: str = "bugfix"
    # gymnasium id (filled from the name when empty)
    id: str = ""
    # keyword arguments of the env constructor (difficulty, reward mode, fault rates, ...)
    kwargs: dict[str, Any] = field(default_factory=dict)
    # train tasks are task_index in [0, train_tasks) on split "train"
    train_tasks: int = 64


@dataclass
class CompressionConfig:
    # a name in envs.compression.STRATEGIES; "none" = no wrapper
    strategy: str = "none"
    trigger: str = "tokens"
    budget_tokens: int = 256
    budget_fraction: float = 0.8
    every_turns: Optional[int] = None
    keep_last: int = 2
    max_compactions: int = 8
    drop_prob: float = 0.0


@dataclass
class PolicyConfig:
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    max_len: int = 512
    mlp_ratio: int = 4
    # auto: none for GRPO, separate for PPO; or none | head | separate
    critic: str = "auto"
    # checkpoint to start from: "warmstart" = the cached behaviour-cloning warm start of this
    # config's warmstart group; a path; or "" = random init (tests only)
    init_checkpoint: str = "warmstart"
    # seed of the random initialisation (before a checkpoint is loaded)
    init_seed: int = 0


@dataclass
class AlgoConfig:
    name: str = MISSING  # grpo | ppo
    # rollouts per task instance (GRPO group size G; PPO uses 1)
    group_size: int = 8
    # task instances per update (rollouts per update = tasks_per_update * group_size)
    tasks_per_update: int = 8
    epochs: int = 1
    minibatches: int = 1
    micro_batch_rows: int = 64
    lr: float = 3e-4
    # learning-rate schedule over the compute budget: constant | linear (decays to 0 at the end)
    lr_schedule: str = "constant"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: Optional[float] = None
    # token | sequence | sequence-norm
    ratio: str = "token"
    # token-mean | seq-mean-token-mean | seq-mean-token-sum | task-mean
    loss_agg: str = "token-mean"
    # GRPO std convention: population | sample | none
    std: str = "population"
    adv_eps: float = 1e-6
    kl_coef: float = 0.0
    kl_kind: str = "k3"
    entropy_coef: float = 0.0
    dynamic_sampling: bool = False
    # decoupled | none | behavior-as-old (how stale behaviour samples are corrected)
    off_policy_correction: str = "decoupled"
    is_cap: float = 2.0
    # PPO
    gamma: float = 1.0
    lam: float = 0.95
    vf_coef: float = 0.5
    value_clip: Optional[float] = 0.2
    value_warmup_updates: int = 0
    norm_adv: bool = True
    value_level: str = "token"
    compression_as_terminal: bool = False
    # C8 demonstration only: put env-written tokens into the policy loss
    loss_on_observations: bool = False


@dataclass
class RolloutConfig:
    num_envs: int = 64
    temperature: float = 1.0
    max_action_tokens: int = 12
    # sample with the policy this many updates old (asynchronous mode); 0 = synchronous
    staleness: int = 0


@dataclass
class BudgetConfig:
    # rollouts | generated_tokens | tool_seconds | train_flops | updates
    kind: str = "rollouts"
    amount: float = 1024
    # hard cap on updates whatever the budget (safety)
    max_updates: int = 100000


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


@dataclass
class LoggerConfig:
    kind: str = "none"  # wandb | none
    project: str = "agent-rl-harness"
    group: str = ""
    name: str = ""


@dataclass
class WarmstartConfig:
    # scripted agent of envs.agents that writes the demonstrations
    agent: str = "noisy_oracle"
    # its noise (the demo noise sets the start success rate)
    noise: float = 0.25
    demos: int = 1000
    epochs: int = 10
    lr: float = 2e-3
    batch_rows: int = 32
    seed: int = 0
    # cache of warm-start checkpoints, keyed by a hash of (env, policy shape, warmstart config)
    cache_dir: str = ".cache/agentrl/warmstart"
    # measure start success on this many held-out tasks x samples (same as eval by default)
    eval_tasks: int = 40
    eval_samples_per_task: int = 2


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    warmstart: WarmstartConfig = field(default_factory=WarmstartConfig)
    seed: int = 0
    # run directory; empty = runs/<algo>-<env>-<hash of the config> (same command -> same dir)
    run_dir: str = ""
    runs_root: str = "runs"
    # resume from the run directory's last checkpoint when there is one
    resume: bool = True
    # torch threads (1 keeps parallel sweep jobs from fighting over cores)
    threads: int = 1
    progress: bool = True
    # testing aid: SIGKILL this process after update N's metrics line, before its checkpoint
    # (0 = never); re-running resumes from update N-1's checkpoint and redoes update N
    debug_kill_after_update: int = 0


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _allowed(field_name: str, value, allowed) -> None:
    if value not in allowed:
        raise ConfigError(f"{field_name}={value!r} is not a valid choice; allowed: {', '.join(map(str, allowed))}")


def resolve_critic(cfg) -> str:
    if cfg.policy.critic != "auto":
        return cfg.policy.critic
    return "separate" if cfg.algo.name == "ppo" else "none"


def to_object(cfg) -> TrainConfig:
    """A ``TrainConfig`` from a DictConfig (or the object itself)."""
    if isinstance(cfg, TrainConfig):
        return cfg
    if isinstance(cfg, DictConfig):
        merged = OmegaConf.merge(OmegaConf.structured(TrainConfig), cfg)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    raise ConfigError(f"expected a TrainConfig or DictConfig, got {type(cfg).__name__}")


def validate(cfg) -> TrainConfig:
    """Check names against the registries and combinations for sense; ``ConfigError`` (one line)
    on the first problem. Returns the config as a ``TrainConfig`` object."""
    try:
        c = to_object(cfg)
    except ConfigError:
        raise
    except Exception as e:  # OmegaConf type errors: keep them to one line
        raise ConfigError(" ".join(str(e).split())) from None
    from algos.advantages import STD_CONVENTIONS
    from algos.compute import BUDGET_KINDS
    from algos.losses import AGGREGATION_MODES, KL_ESTIMATORS
    from algos.ppo import VALUE_LEVELS
    from algos.trainer import LR_SCHEDULES, OFF_POLICY_CORRECTIONS, RATIO_KINDS, TRAINERS, make_trainer  # noqa: F401

    import algos.grpo  # noqa: F401
    import algos.ppo  # noqa: F401

    a = c.algo
    _allowed("algo.name", a.name, sorted(TRAINERS))
    _allowed("env.name", c.env.name, sorted(ENV_IDS))
    if c.env.id and c.env.id != ENV_IDS[c.env.name]:
        raise ConfigError(f"env.id={c.env.id!r} does not match env.name={c.env.name!r} (expected {ENV_IDS[c.env.name]!r})")
    _allowed("algo.loss_agg", a.loss_agg, list(AGGREGATION_MODES))
    _allowed("algo.std", a.std, list(STD_CONVENTIONS))
    _allowed("algo.kl_kind", a.kl_kind, list(KL_ESTIMATORS))
    _allowed("algo.ratio", a.ratio, RATIO_KINDS)
    _allowed("algo.lr_schedule", a.lr_schedule, list(LR_SCHEDULES))
    _allowed("algo.off_policy_correction", a.off_policy_correction, OFF_POLICY_CORRECTIONS)
    _allowed("algo.value_level", a.value_level, VALUE_LEVELS)
    _allowed("budget.kind", c.budget.kind, BUDGET_KINDS)
    _allowed("policy.critic", c.policy.critic, CRITIC_CHOICES)
    _allowed("logger.kind", c.logger.kind, LOGGER_KINDS)
    _allowed("eval.split", c.eval.split, ("train", "heldout"))
    try:
        from envs.compression import STRATEGIES, TRIGGERS

        _allowed("compression.strategy", c.compression.strategy, list(STRATEGIES))
        _allowed("compression.trigger", c.compression.trigger, TRIGGERS)
    except ImportError:  # pragma: no cover - the wrapper module is part of the project
        pass
    critic = resolve_critic(c)
    if a.name == "grpo" and a.group_size < 2:
        raise ConfigError(
            f"algo.group_size={a.group_size} is invalid for GRPO: group-relative advantages need at least 2 "
            "rollouts per task (use algo=ppo for G=1)")
    if a.name == "ppo" and critic == "none":
        raise ConfigError("algo=ppo needs a critic but policy.critic=none; allowed for PPO: head, separate (or auto)")
    if a.name == "ppo" and a.dynamic_sampling:
        raise ConfigError("algo.dynamic_sampling=true is GRPO-only (it drops all-same groups); PPO has no groups: set it false")
    if a.name == "grpo" and a.value_warmup_updates:
        raise ConfigError("algo.value_warmup_updates is PPO-only (GRPO has no critic): set it to 0")
    if a.group_size < 1:
        raise ConfigError(f"algo.group_size={a.group_size} must be >= 1")
    if a.tasks_per_update < 1:
        raise ConfigError(f"algo.tasks_per_update={a.tasks_per_update} must be >= 1")
    for name, v in (("algo.epochs", a.epochs), ("algo.minibatches", a.minibatches),
                    ("algo.micro_batch_rows", a.micro_batch_rows)):
        if v < 1:
            raise ConfigError(f"{name}={v} must be >= 1")
    if not 0 <= a.clip_low < 1:
        raise ConfigError(f"algo.clip_low={a.clip_low} must be in [0, 1)")
    if a.clip_high < 0:
        raise ConfigError(f"algo.clip_high={a.clip_high} must be >= 0")
    if a.dual_clip is not None and a.dual_clip <= 1:
        raise ConfigError(f"algo.dual_clip={a.dual_clip} must be > 1 (or null to disable)")
    if not (0 <= a.gamma <= 1 and 0 <= a.lam <= 1):
        raise ConfigError(f"algo.gamma={a.gamma} and algo.lam={a.lam} must be in [0, 1]")
    if a.lr <= 0:
        raise ConfigError(f"algo.lr={a.lr} must be > 0")
    if a.kl_coef < 0 or a.entropy_coef < 0:
        raise ConfigError("algo.kl_coef and algo.entropy_coef must be >= 0")
    if a.is_cap < 1:
        raise ConfigError(f"algo.is_cap={a.is_cap} must be >= 1 (it truncates pi_old/pi_behavior from above)")
    if a.value_clip is not None and a.value_clip <= 0:
        raise ConfigError(f"algo.value_clip={a.value_clip} must be > 0 (or null to disable)")
    p = c.policy
    if p.d_model % p.n_heads:
        raise ConfigError(f"policy.d_model={p.d_model} must be divisible by policy.n_heads={p.n_heads}")
    r = c.rollout
    if r.num_envs < 1:
        raise ConfigError(f"rollout.num_envs={r.num_envs} must be >= 1")
    if r.temperature <= 0:
        raise ConfigError(f"rollout.temperature={r.temperature} must be > 0 (behavior log-probs are taken at this temperature)")
    if r.staleness < 0:
        raise ConfigError(f"rollout.staleness={r.staleness} must be >= 0 (0 = synchronous)")
    if r.max_action_tokens < 1 or r.max_action_tokens + 4 > p.max_len:
        raise ConfigError(f"rollout.max_action_tokens={r.max_action_tokens} must be in [1, policy.max_len - 4 = {p.max_len - 4}]")
    if c.compression.strategy != "none" and c.compression.budget_tokens + r.max_action_tokens + 64 > p.max_len:
        raise ConfigError(
            f"compression.budget_tokens={c.compression.budget_tokens} leaves no room in policy.max_len={p.max_len}: "
            f"need budget_tokens + max_action_tokens + 64 <= max_len (raise policy.max_len or lower the budget)")
    if c.budget.amount <= 0:
        raise ConfigError(f"budget.amount={c.budget.amount} must be > 0")
    if c.eval.tasks < 1 or c.eval.samples_per_task < 1:
        raise ConfigError("eval.tasks and eval.samples_per_task must be >= 1")
    if c.eval.temperature < 0:
        raise ConfigError(f"eval.temperature={c.eval.temperature} must be >= 0 (0 = greedy)")
    if c.env.train_tasks < 1:
        raise ConfigError(f"env.train_tasks={c.env.train_tasks} must be >= 1")
    if p.init_checkpoint not in ("", "warmstart"):
        import os

        if not os.path.exists(p.init_checkpoint):
            raise ConfigError(f"policy.init_checkpoint={p.init_checkpoint!r} does not exist (use a path, 'warmstart' or '')")
    return c


__all__ = ["AlgoConfig", "BudgetConfig", "CompressionConfig", "ConfigError", "ENV_IDS", "EnvConfig",
           "EvalConfig", "LoggerConfig", "PolicyConfig", "RolloutConfig", "TrainConfig", "WarmstartConfig",
           "register_configs", "resolve_critic", "to_object", "validate"]
