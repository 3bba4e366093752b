"""Boundary claim C17: PPO bootstraps across a compression from the context the episode continued
from, and relabelling the compression as terminal changes the advantages. :func:`measure_c17`
returns the claim's frozen result: the measured values as fields, the row's texts and the pass
rule."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import torch

from algos.advantages import gae
from algos.decisions import GAELayout
from algos.policy import PolicyModel
from algos.ppo import compression_boundaries, terminal_at
from algos.requests import make_requests
from algos.trainer import make_trainer
from experiments.claims.common import (
    TOK,
    algo_config,
    claims_config,
    collect,
    make_engine,
    run_update,
    start_model_info,
    start_policy,
)
from experiments.claims.result import EMPIRICAL, ClaimResult

C17_COMPRESSION = {"strategy": "recent", "trigger": "turns", "every_turns": 3, "keep_last": 2}


def _value_at_end(model: PolicyModel, tokens: list[int]) -> float:
    """The critic's value of the prefix ``tokens`` (read at its last position)."""
    with torch.no_grad():
        _, values = model(torch.tensor([tokens], dtype=torch.long))
    return float(values[0, -1])


def segment_boundaries(layout: GAELayout) -> list[tuple[int, int]]:
    """``(trajectory i, point k)`` of every decision point that is the last one of a segment the
    trajectory continued after (the row changes between point k and k + 1): its compressions
    (``algos.ppo.compression_boundaries``)."""
    return [(int(i), int(k)) for i, k in compression_boundaries(layout.rows, layout.mask).tolist()]


def as_terminal(layout: GAELayout, boundaries: list[tuple[int, int]]) -> GAELayout:
    """A new GAE layout with every boundary in ``boundaries`` relabelled ``terminated`` and its
    bootstrap set to 0 (``algos.ppo.terminal_at``, on copies of those two tensors; the other
    fields are ``layout``'s, unchanged): the mislabelling C17 rules out, built as input data
    (``algo=ppo_segment_terminal`` trains with it)."""
    at = torch.tensor(boundaries, dtype=torch.long).reshape(-1, 2)
    terminated, next_values = terminal_at(layout.terminated, layout.next_values, at)
    return dataclasses.replace(layout, terminated=terminated, next_values=next_values)


def _gae(layout: GAELayout, gamma: float, lam: float) -> torch.Tensor:
    return gae(layout.rewards, layout.values, layout.next_values, layout.terminated,
               layout.truncated, gamma=gamma, lam=lam, mask=layout.mask)[0]


@dataclass(frozen=True)
class CompressionBoundary:
    """One compression boundary of the PPO update's GAE layout: the segment's ``end`` label, its
    reward, value and the bootstrap GAE used; V of the continuation context ``[BOS] continuation
    [SEP]`` computed afresh with the pre-update model (``value_continuation``), the critic's value
    at the next segment's first decision point (``value_next_first``) and V of the task's reset
    context (``value_reset``); whether the next segment starts with the continuation context
    (``prefix_ok``); the real ``terminated`` / ``truncated`` flags; TD residuals (lambda 0) and
    GAE advantages for the real labels (``td_continuing``, ``adv_continuing``) and with the
    boundary relabelled terminal (``td_terminal``, ``adv_terminal``)."""

    end: str
    reward: float
    value: float
    bootstrap: float
    value_continuation: float
    value_next_first: float
    value_reset: float
    prefix_ok: bool
    terminated: bool
    truncated: bool
    td_continuing: float
    td_terminal: float
    adv_continuing: float
    adv_terminal: float

    def holds(self, gamma: float) -> bool:
        """Bootstrap = V(continuation context) = the next segment's first value != V(reset
        context), no flag, residual r + gamma V' - V; relabelled terminal: residual r - V,
        different from the real one."""
        return (self.end == "compressed" and self.prefix_ok and abs(self.bootstrap - self.value_continuation) < 1e-4
                and abs(self.value_continuation - self.value_next_first) < 1e-4
                and abs(self.value_continuation - self.value_reset) > 1e-6
                and not self.terminated and not self.truncated
                and abs(self.td_continuing - (self.reward + gamma * self.bootstrap - self.value)) < 1e-5
                and abs(self.td_terminal - (self.reward - self.value)) < 1e-5
                and abs(self.td_continuing - self.td_terminal) > 1e-6)

    @property
    def text(self) -> str:
        """The boundary's numbers as the example of C17's row."""
        return (f"r {self.reward:g}, V(s) {self.value:.4f}, bootstrap used {self.bootstrap:.4f}, critic at the "
                f"next segment's [BOS] continuation [SEP] {self.value_next_first:.4f} (fresh forward on it alone "
                f"{self.value_continuation:.4f}), V(reset context of the same task) {self.value_reset:.4f}; TD "
                f"residual continuing {self.td_continuing:+.4f} vs relabelled terminal {self.td_terminal:+.4f} (= r - "
                f"V), GAE advantage {self.adv_continuing:+.4f} vs {self.adv_terminal:+.4f}")


@dataclass(frozen=True)
class C17Result(ClaimResult):
    """Every compression boundary of a real PPO update (:class:`CompressionBoundary`), with the
    update's ``rollouts``, ``multi_segment`` trajectories, ``gamma`` and ``lam``."""

    what: ClassVar[str] = ("bootstrap from the real continuation after compression (PPO on real compressed "
                           "rollouts)")
    expected: ClassVar[str] = "GAE uses V(compressed context), never a reset task; terminal flag gives r - V"
    kind: ClassVar[str] = EMPIRICAL

    rollouts: int
    multi_segment: int
    gamma: float
    lam: float
    boundaries: tuple[CompressionBoundary, ...]

    def passes(self) -> bool:
        """At least one boundary, and every one :meth:`CompressionBoundary.holds`."""
        return bool(self.boundaries) and all(b.holds(self.gamma) for b in self.boundaries)

    @property
    def measured(self) -> str:
        bs = self.boundaries
        example = f"first boundary: {bs[0].text}" if bs else "no compression boundary in the batch"
        max_err = max((abs(b.bootstrap - b.value_continuation) for b in bs), default=float("nan"))
        min_reset = min((abs(b.value_continuation - b.value_reset) for b in bs), default=float("nan"))
        flags = sorted({(b.terminated, b.truncated) for b in bs})
        flips = sum((b.adv_continuing > 0) != (b.adv_terminal > 0) for b in bs)
        return (f"PPO (value head, gamma {self.gamma:g}, lambda {self.lam:g}) on {self.rollouts} real easy-BugFix "
                f"rollouts with compression (recent, every 3 turns): {self.multi_segment} multi-segment trajectories, "
                f"{len(bs)} boundaries; max |bootstrap - V(continuation context)| {max_err:.2g}, min |V(continuation) "
                f"- V(reset context)| {min_reset:.3g}; boundary flags terminated/truncated {flags}; {example}; the "
                f"same layout relabelled terminal at all {len(bs)} boundaries flips the advantage sign at "
                f"{flips}/{len(bs)}")


def _ppo_record(seed: int, rollouts: int, lr: float):
    """Two critic-only warm-up PPO updates on real compressed rollouts, then a third update's
    rollouts through :func:`run_update`: ``(algo, pre-update model, its rollouts, record)``."""
    c = claims_config()
    policy = start_policy(critic="head")
    algo = algo_config("ppo", group_size=1, tasks_per_update=rollouts, epochs=4, minibatches=1, lr=lr,
                       value_warmup_updates=2)
    trainer = make_trainer("ppo", algo, policy, temperature=c.rollout.temperature)
    engine = make_engine(num_envs=rollouts, compression=C17_COMPRESSION)

    def rollouts_of(u: int):
        reqs = make_requests(rollouts, 1, seed=seed * 100 + u, task_indices=[i % c.env.train_tasks for i in range(rollouts)])
        return collect(engine, policy, reqs, seed * 100 + u, u)

    for u in range(2):
        trainer.update(rollouts_of(u))
    trajs = rollouts_of(2)
    engine.close()
    before = copy.deepcopy(policy).eval()
    return algo, before, trajs, run_update(trainer, trajs)


def measure_c17(seed: int = 17, rollouts: int = 32, lr: float = 1e-2) -> C17Result:
    """Bootstrap values and advantages at every compression boundary of a real PPO update.

    Real rollouts of the warm-start policy (value head) on easy BugFix with the compression wrapper
    (``recent``, keep 2, every 3 turns), ``rollouts`` per update through the real PPO trainer
    (gamma 1, lambda 0.95, 4 epochs, lr ``lr``); 2 critic-only warm-up updates give the value head
    non-trivial outputs, then the third update's GAE layout and critic outputs are read
    (:func:`_ppo_record`). The same layout with every compression relabelled terminal
    (:func:`as_terminal`) goes through ``algos.advantages.gae`` too; each boundary is a
    :class:`CompressionBoundary`."""
    start_model_info()
    torch.set_num_threads(1)
    algo, before, trajs, record = _ppo_record(seed, rollouts, lr)
    batch, raw, lay = record.batch, record.inputs.old_values, record.advantages.layout
    where = segment_boundaries(lay)
    wrong = as_terminal(lay, where)
    td_c, td_t = _gae(lay, algo.gamma, 0.0), _gae(wrong, algo.gamma, 0.0)
    adv_c, adv_t = _gae(lay, algo.gamma, algo.lam), _gae(wrong, algo.gamma, algo.lam)
    bounds = []
    for i, k in where:
        rows = lay.rows[i]
        seg, nxt = batch.segment(int(rows[k])), batch.segment(int(rows[k + 1]))
        first = batch.trajectories[i].segments[0]
        ctx_tokens = [TOK.bos_id, *seg.continuation, TOK.sep_id]
        bounds.append(CompressionBoundary(
            end=seg.end, reward=float(lay.rewards[i, k]), value=float(lay.values[i, k]),
            bootstrap=float(lay.next_values[i, k]), value_continuation=_value_at_end(before, ctx_tokens),
            value_next_first=float(raw[int(rows[k + 1]), int(lay.cols[i, k + 1]) - 1]),
            value_reset=_value_at_end(before, first.tokens[: first.turns[0].start]),
            prefix_ok=nxt.tokens[: len(ctx_tokens)] == ctx_tokens,
            terminated=bool(lay.terminated[i, k]), truncated=bool(lay.truncated[i, k]),
            td_continuing=float(td_c[i, k]), td_terminal=float(td_t[i, k]),
            adv_continuing=float(adv_c[i, k]), adv_terminal=float(adv_t[i, k]),
        ))
    return C17Result(rollouts=len(trajs),
                     multi_segment=sum(len(t.segments) > 1 for t in batch.trajectories),
                     gamma=algo.gamma, lam=algo.lam, boundaries=tuple(bounds))
