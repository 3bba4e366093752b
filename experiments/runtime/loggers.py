"""Experiment loggers: one small interface, two implementations, chosen by name.

``make_logger(kind, run_dir, name, group, job_type, config)`` returns a :class:`Logger`:

- ``"wandb"`` -> :class:`WandbLogger`: a Weights & Biases run, **offline by default** (nothing is
  sent, no account and no login prompt: ``mode="offline"`` plus ``WANDB_MODE=offline`` /
  ``WANDB_SILENT=true`` set before ``wandb.init``). Files go to ``<run_dir>/wandb/offline-run-*``;
  ``wandb sync`` can upload them later if anyone wants to. ``group`` is the sweep name (all runs of
  one comparison share it), ``job_type`` the algorithm (``grpo`` / ``ppo``), ``config`` is logged
  flat with dotted keys (``algo.group_size``), so runs can be filtered by any config field.
- ``"none"`` -> :class:`NoneLogger`: a real class that accepts every call and does nothing.

The interface (what ``experiments/train.py`` and ``experiments/compare/job.py`` call):

``define_x_axes(step_metric="compute/rollouts", axes=COMPUTE_AXES)``
    Declares the compute counters as x-axes (``wandb.define_metric``). Each counter in ``axes``
    is defined as its own metric; every other namespace (``rollout/*``, ``train/*``,
    ``critic/*``, ``eval/*``, ``env/*``) is defined with the glob form
    ``define_metric("<ns>/*", step_metric=step_metric)``, so W&B plots it against the chosen
    compute counter by default, and the other counters are selectable as x-axis in the UI.
    (wandb accepts a ``*`` only as a suffix of the name; an explicit name wins over a glob.)
``log(metrics)``
    One namespaced dict per update (the same dict that goes to ``metrics.jsonl``).
``log_images({name: png_path})``, ``log_table(name, columns, rows)``, ``finish()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from algos import metric_keys as mk
from experiments.runfiles.axes import COMPUTE_AXES

#: Metric namespaces plotted against the step metric (``compute/*`` counters are the axes).
PLOTTED_NAMESPACES: tuple[str, ...] = tuple(ns.rstrip("/") for ns in (mk.ROLLOUT, mk.TRAIN, mk.CRITIC, mk.OFF_POLICY,
                                                                      mk.ASYNC, mk.EVAL))

#: The project name of every W&B run of this harness.
WANDB_PROJECT = "agent-rl-harness"


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"algo": {"group_size": 8}}`` -> ``{"algo.group_size": 8}`` (lists stay values).

    An OmegaConf ``DictConfig`` is resolved to plain containers first.
    """
    if isinstance(config, DictConfig):
        config = OmegaConf.to_container(config, resolve=True)
    flat: dict[str, Any] = {}
    for key, value in config.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_config(value, prefix=f"{full}."))
        else:
            flat[full] = value
    return flat


class Logger:
    """The logger interface. Subclasses implement every method; this base documents them."""

    kind: str = "base"

    def define_x_axes(
        self, step_metric: str = mk.COMPUTE_ROLLOUTS, axes: Sequence[str] = COMPUTE_AXES
    ) -> None:
        raise NotImplementedError

    def log(self, metrics: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        raise NotImplementedError

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError


class NoneLogger(Logger):
    """Accepts every call and records nothing (``logger=none``)."""

    kind = "none"

    def __init__(self, **_: Any) -> None:
        """Takes (and ignores) the keyword arguments every logger gets."""

    def define_x_axes(
        self, step_metric: str = mk.COMPUTE_ROLLOUTS, axes: Sequence[str] = COMPUTE_AXES
    ) -> None:
        _check_axes(step_metric, axes)

    def log(self, metrics: Mapping[str, Any]) -> None:
        return None

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        return None

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        return None

    def finish(self) -> None:
        return None


class WandbLogger(Logger):
    """A W&B run written under ``<run_dir>/wandb``; offline unless ``mode`` says otherwise.

    ``mode`` is ``"offline"`` by default; ``"disabled"`` is also accepted. ``"online"`` is only
    used when asked for explicitly (this harness never needs it).
    """

    kind = "wandb"

    def __init__(
        self,
        run_dir: str | Path,
        name: str,
        group: str | None,
        job_type: str | None,
        config: Mapping[str, Any],
        mode: str = "offline",
        project: str = WANDB_PROJECT,
    ) -> None:
        if mode != "online":
            # Set before importing/initialising wandb: no network, no login prompt, no banner.
            os.environ["WANDB_MODE"] = mode
            os.environ.setdefault("WANDB_SILENT", "true")
            os.environ.setdefault("WANDB_DISABLE_GIT", "true")
            os.environ.setdefault("WANDB_CONSOLE", "off")
        import wandb  # lazy: optional heavy dependency, imported only when a W&B logger is made

        self._wandb = wandb
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=project,
            name=name,
            group=group,
            job_type=job_type,
            dir=str(self.run_dir),
            mode=mode,
            config=flatten_config(config),
            reinit="create_new",
            settings=wandb.Settings(
                silent=True,
                console="off",
                x_disable_stats=True,
                x_disable_meta=True,
                save_code=False,
                disable_git=True,
            ),
        )
        self._finished = False

    @property
    def wandb_dir(self) -> Path:
        """The run's own directory (``<run_dir>/wandb/offline-run-<date>-<id>``)."""
        return Path(self.run.dir).parent

    def define_x_axes(
        self, step_metric: str = mk.COMPUTE_ROLLOUTS, axes: Sequence[str] = COMPUTE_AXES
    ) -> None:
        _check_axes(step_metric, axes)
        for axis in axes:
            self.run.define_metric(axis)
        for ns in PLOTTED_NAMESPACES:
            self.run.define_metric(f"{ns}/*", step_metric=step_metric)

    def log(self, metrics: Mapping[str, Any]) -> None:
        self.run.log(dict(metrics))

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        payload = {}
        for name, path in images.items():
            path = Path(path)
            if not path.is_file():
                raise FileNotFoundError(f"log_images: {name!r} -> {path} does not exist")
            payload[name] = self._wandb.Image(str(path), caption=path.name)
        if payload:
            self.run.log(payload)

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        columns = list(columns)
        for i, row in enumerate(rows):
            if len(row) != len(columns):
                raise ValueError(
                    f"log_table({name!r}): row {i} has {len(row)} values, expected {len(columns)}"
                )
        table = self._wandb.Table(columns=columns, data=[list(r) for r in rows])
        self.run.log({name: table})

    def finish(self) -> None:
        if not self._finished:
            self._finished = True
            self.run.finish()


LOGGERS: dict[str, type[Logger]] = {"wandb": WandbLogger, "none": NoneLogger}


def _check_axes(step_metric: str, axes: Sequence[str]) -> None:
    if isinstance(axes, str):
        raise TypeError("axes must be a sequence of metric names, not one string")
    for axis in axes:
        if not axis.startswith(mk.COMPUTE):
            raise ValueError(f"x-axis {axis!r} is not a compute counter (compute/*)")
    if step_metric not in axes:
        raise ValueError(f"step_metric {step_metric!r} must be one of the axes {list(axes)}")


def make_logger(
    kind: str,
    run_dir: str | Path,
    name: str,
    group: str | None = None,
    job_type: str | None = None,
    config: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Logger:
    """The logger named ``kind`` (``wandb`` or ``none``); ``ValueError`` lists the valid kinds.

    ``kwargs`` go to the logger class (``mode=``/``project=`` for wandb).
    """
    if kind not in LOGGERS:
        raise ValueError(f"unknown logger kind {kind!r}; allowed: {', '.join(sorted(LOGGERS))}")
    if kind == "none":
        return NoneLogger()
    return LOGGERS[kind](
        run_dir=run_dir, name=name, group=group, job_type=job_type, config=dict(config or {}), **kwargs
    )
