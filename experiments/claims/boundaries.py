"""Boundary measurement: PPO bootstraps across a compression from the context the episode
continued from, and relabelling the compression as terminal changes the advantages (C17)."""

from __future__ import annotations

import copy
import dataclasses

import torch

from algos.advantages import gae
from algos.decisions import GAELayout
from algos.policy import PolicyModel
from algos.ppo import compression_boundaries, terminal_at
from algos.rollout import make_requests
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


def measure_c17(seed: int = 17, rollouts: int = 32, lr: float = 1e-2) -> dict:
    """Bootstrap values and advantages at every compression boundary of a real PPO update.

    Real rollouts of the warm-start policy (value head) on easy BugFix with the compression wrapper
    (``recent``, keep 2, every 3 turns), ``rollouts`` per update through the real PPO trainer
    (gamma 1, lambda 0.95, 4 epochs, lr ``lr``); 2 critic-only warm-up updates give the value head
    non-trivial outputs, then the third update's GAE layout and critic outputs are read. The same
    layout with every compression relabelled terminal (:func:`as_terminal`) goes through
    ``algos.advantages.gae`` too. Per boundary (``boundaries``, a list of dicts): the segment's
    ``end`` label, reward ``r``, value ``V``, the bootstrap used (``boot``), V of the continuation
    context ``[BOS] continuation [SEP]`` computed afresh with the pre-update model (``V_cont``), the
    critic's value at the next segment's first decision point (``V_next_first``), V of the task's
    reset context (``V_reset``), whether the next segment starts with the continuation context
    (``prefix_ok``), the real ``terminated`` / ``truncated`` flags, TD residuals (lambda 0) and GAE advantages for the real labels
    (``td_c``, ``adv_c``) and the relabelled ones (``td_t``, ``adv_t``). Also ``rollouts``,
    ``multi_segment`` trajectories, ``gamma`` and ``lam``."""
    start_model_info()
    torch.set_num_threads(1)
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
    record = run_update(trainer, trajs)
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
        bounds.append({
            "end": seg.end, "r": float(lay.rewards[i, k]), "V": float(lay.values[i, k]),
            "boot": float(lay.next_values[i, k]), "V_cont": _value_at_end(before, ctx_tokens),
            "V_next_first": float(raw[int(rows[k + 1]), int(lay.cols[i, k + 1]) - 1]),
            "V_reset": _value_at_end(before, first.tokens[: first.turns[0].start]),
            "prefix_ok": nxt.tokens[: len(ctx_tokens)] == ctx_tokens,
            "terminated": bool(lay.terminated[i, k]), "truncated": bool(lay.truncated[i, k]),
            "td_c": float(td_c[i, k]), "td_t": float(td_t[i, k]),
            "adv_c": float(adv_c[i, k]), "adv_t": float(adv_t[i, k]),
        })
    return {"rollouts": len(trajs), "multi_segment": sum(len(t.segments) > 1 for t in batch.trajectories),
            "gamma": algo.gamma, "lam": algo.lam, "boundaries": bounds}
