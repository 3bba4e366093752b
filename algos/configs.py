"""The base of the algorithm config schemas: :class:`AlgoConfig` (the knobs of the shared update
of ``algos/trainer.py``), :class:`ConfigError` and the one-line field checks.

Each method's schema is a dataclass extending :class:`AlgoConfig` (or a method's schema whose
fields it reads), defined next to its trainer (``algos/grpo.py`` ``GrpoConfig``, ``algos/ppo.py``
``PpoConfig``, ...) and registered with it: ``@register(name, config=<Schema>, ...)``
(``algos.registry``). A schema states no ``name``: an instance built without one reads it from the
registration (:func:`algos.registry.config_name`), and :func:`algo_schema` maps a name back to its
schema, so the trainer's name is written once. ``experiments.runtime.schema`` builds the Hydra
``algo`` group (``algo/<name>_schema``) from the registry.

Every check raises :class:`ConfigError` with ONE line that says what is wrong, why, and what is
allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from omegaconf import MISSING

from algos.corrections import CORRECTIONS, CorrectionParams
from algos.losses import AGGREGATION_MODES, KL_ESTIMATORS
from algos.registry import config_name, config_schemas
from algos.trainer import LR_SCHEDULES, RATIO_KINDS


class ConfigError(ValueError):
    """A one-line explanation of an invalid configuration."""


def check_choice(name: str, value, allowed) -> None:
    """``ConfigError`` unless ``value`` is one of ``allowed`` (the message names the field ``name``)."""
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not a valid choice; allowed: {', '.join(map(str, allowed))}")


def check_at_least(name: str, value, low) -> None:
    """``ConfigError`` unless ``value >= low``."""
    if value < low:
        raise ConfigError(f"{name}={value} must be >= {low}")


def algo_schema(name: str) -> type[AlgoConfig]:
    """The config schema registered with trainer ``name``; ``ConfigError`` listing the registered ones."""
    schemas = config_schemas()
    if name not in schemas:
        raise ConfigError(f"algo.name={name!r} is not a valid choice; allowed: {', '.join(schemas)}")
    return schemas[name]


@dataclass
class AlgoConfig:
    """The knobs every trainer reads (the shared update of ``algos/trainer.py``).

    Calling ``AlgoConfig(name=..., **fields)`` builds that algorithm's schema (``GrpoConfig``,
    ``PpoConfig``, ...), so a field the algorithm does not have is a ``TypeError``. A registered
    schema built without ``name`` takes the name it is registered with; the bare ``AlgoConfig()``
    keeps ``name`` missing (the root schema before Hydra merges an algo option into it)."""

    # the trainer's registered name; a schema's instance fills it from its registration
    name: str = MISSING
    # rollouts per task instance (GRPO group size G; PPO uses 1)
    group_size: int = 8
    # task instances per update (rollouts per update = tasks_per_update * group_size)
    tasks_per_update: int = 8
    # passes over each batch, optimizer steps per pass, rows per gradient-accumulation slice
    epochs: int = 1
    minibatches: int = 1
    micro_batch_rows: int = 64
    lr: float = 3e-4
    # learning-rate schedule over the compute budget: constant | linear (decays to 0 at the end)
    lr_schedule: str = "constant"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    # PPO-style clip range (clip_high > clip_low = clip-higher); dual_clip null or > 1
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: Optional[float] = None
    # importance ratio: token | sequence | sequence-norm
    ratio: str = "token"
    # loss aggregation: token-mean | seq-mean-token-mean | seq-mean-token-sum | task-mean
    loss_agg: str = "token-mean"
    # KL to the frozen start model: coefficient (0 = off) and estimator k1 | k2 | k3
    kl_coef: float = 0.0
    kl_kind: str = "k3"
    entropy_coef: float = 0.0
    # stale-sample correction (algos.corrections): decoupled (token TIS) | none | behavior-as-old |
    # sequence-tis | token-mask | sequence-mask | neg-adv-sequence-mask
    off_policy_correction: str = "decoupled"
    # the corrections' parameters (algos.corrections.CorrectionParams: meaning and allowed ranges):
    # truncation cap of pi_old/pi_behavior, its kept band [is_low, is_high], and the divergence
    # above which neg-adv-sequence-mask drops a row's negative-advantage tokens
    is_cap: float = 2.0
    is_low: float = 0.5
    is_high: float = 5.0
    neg_adv_kl_max: float = 0.1

    def __new__(cls, *args, **kwargs):
        if cls is AlgoConfig and kwargs.get("name") not in (None, MISSING):
            cls = algo_schema(kwargs["name"])
        return super().__new__(cls)

    def __post_init__(self) -> None:
        self._check_name()
        check_choice("algo.loss_agg", self.loss_agg, list(AGGREGATION_MODES))
        check_choice("algo.kl_kind", self.kl_kind, list(KL_ESTIMATORS))
        check_choice("algo.ratio", self.ratio, list(RATIO_KINDS))
        check_choice("algo.lr_schedule", self.lr_schedule, list(LR_SCHEDULES))
        check_choice("algo.off_policy_correction", self.off_policy_correction, list(CORRECTIONS))
        for name in ("group_size", "tasks_per_update", "epochs", "minibatches", "micro_batch_rows"):
            check_at_least(f"algo.{name}", getattr(self, name), 1)
        if not 0 <= self.clip_low < 1:
            raise ConfigError(f"algo.clip_low={self.clip_low} must be in [0, 1)")
        check_at_least("algo.clip_high", self.clip_high, 0)
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ConfigError(f"algo.dual_clip={self.dual_clip} must be > 1 (or null to disable)")
        if self.lr <= 0:
            raise ConfigError(f"algo.lr={self.lr} must be > 0")
        if self.kl_coef < 0 or self.entropy_coef < 0:
            raise ConfigError(f"algo.kl_coef={self.kl_coef} and algo.entropy_coef={self.entropy_coef} must be >= 0")
        try:
            CorrectionParams.of(self)
        except ValueError as err:
            raise ConfigError(f"algo.{err}") from None

    def _check_name(self) -> None:
        """Fill a missing ``name`` of a schema instance from its registration; ``ConfigError`` when
        the schema is registered with no trainer or ``name`` belongs to another schema."""
        if self.name == MISSING and type(self) is not AlgoConfig:
            registered = config_name(type(self))
            if registered is None:
                raise ConfigError(f"{type(self).__name__} is registered with no trainer; register it with its trainer: "
                                  f"@register(<name>, config={type(self).__name__}) (algos.registry)")
            self.name = registered
        if self.name != MISSING and algo_schema(self.name) is not type(self):
            raise ConfigError(f"algo.name={self.name!r} does not match its schema {type(self).__name__} "
                              f"(expected {algo_schema(self.name).__name__})")


__all__ = ["AlgoConfig", "ConfigError", "algo_schema", "check_at_least", "check_choice"]
