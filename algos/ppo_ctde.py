"""Two learning agents: PPO with a centralized critic (``ppo_ctde``) and independent PPO
(``ppo_independent``), for the rollouts of a multi-agent env (``algos.rollout.RolloutEngine`` on a
PettingZoo env, e.g. PairFix: ``algos.pair_rollout``'s ``PairEpisode``s).

Centralized training, decentralized execution (CTDE, as in MADDPG / MAPPO):

- **actors**: each agent's policy reads only its own context (the rows of its
  ``PairTrajectory``s); nothing of the other agent's private context enters its forward, so
  acting needs no joint information;
- **centralized critic** (``ppo_ctde``): a ``ValueModel`` over the joint state of each decision
  point (``PairTrajectory.joint_points``: own context + the other's context + [SEP], so both
  files as far as viewed, both action histories, every message and test result), used only at
  training time. Its values replace the local ones in PPO's GAE, which runs per agent over
  that agent's own decision points (one per turn, ``value_level=turn``):

      delta_k = r_k + gamma * V_c(s_{k+1}) * (1 - terminated_k) - V_c(s_k)
      A_k     = delta_k + gamma * lam * (1 - done_k) * A_{k+1}

  (``lam`` the actor's lambda; the critic's targets use ``algo.critic_lam``, and ``algo.lam_alpha``
  makes the actor's lambda length-adaptive, exactly as in ``algos.ppo``)

  with ``s_k`` the joint state at the agent's ``k``-th turn and ``V_c(s_{K})`` of a truncated end
  read on the joint state after the final observation (``joint_bootstrap``). Everything else
  (the GAE layout and its boundary flags, the clipped losses, aggregation, metrics) is
  ``algos.ppo.PPOTrainer``'s, by subclassing: this module only swaps where values come from;
- **local critics** (``ppo_independent``): plain PPO per agent, its critic on its own context.

``PairLearner`` is the one two-agent learner: the update of both agents' trainers from a batch
of ``PairEpisode``s, their learning rates and their checkpoint state (the run loop's two-agent
side, ``experiments.runtime.pair.TwoAgentLearner``, wraps it). It holds one trainer per agent
(``shared_policy=False``: own policy and own critic each; with ``ppo_ctde`` each agent's critic
is centralized, as MADDPG's per-agent critics) or one trainer for both (``shared_policy=True``:
one policy and one critic; the agent id is the token after ``agent`` in the first observation of
every context, ``task : agent a ...``).
Its metrics are namespaced per agent: ``agent_a/<key>`` and ``agent_b/<key>`` for every trainer
metric of that agent's update and for the rollout metrics of ``pair_rollout_metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from algos import metric_keys as mk
from algos.batch import Batch
from algos.compute import attention_flops
from algos.configs import ConfigError
from algos.metrics import explained_variance
from algos.pair_rollout import PairEpisode, agent_trajectories
from algos.policy import shift_values
from algos.ppo import PPOTrainer, PpoConfig
from algos.registry import register
from algos.update import Advantages, ForwardOutput


@dataclass
class PpoIndependentConfig(PpoConfig):
    """Two-agent PPO with one local critic per agent (env=pairfix; run by
    ``experiments/runtime/pair.py``). One value per turn (``value_level=turn``)."""

    value_level: str = "turn"
    # one policy (and critic) for both agents, the agent id in the first observation
    shared_policy: bool = False
    # agents whose policy is never updated (distinct agents of the env; needs shared_policy=false)
    frozen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(set(self.frozen)) != len(self.frozen):
            raise ConfigError(f"algo.frozen={list(self.frozen)!r} is invalid; allowed: distinct agent names")
        if self.shared_policy and self.frozen:
            raise ConfigError(f"algo.frozen={list(self.frozen)!r} needs algo.shared_policy=false (a frozen agent "
                              "needs its own policy)")


@dataclass
class PpoCtdeConfig(PpoIndependentConfig):
    """Two-agent PPO with a centralized critic over both agents' contexts at training time and
    decentralized actors (needs one value per turn). The critic's window is
    ``2 * policy.max_len + 2`` tokens (own context + the other's + separators)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.value_level != "turn":
            raise ConfigError(f"algo.value_level={self.value_level!r} is invalid for ppo_ctde; allowed: turn "
                              "(the centralized critic values each agent's decision points)")


@dataclass
class JointInputs:
    """The centralized critic's inputs of one batch: ``P`` joint states, each placed at the raw
    value position its value is read at (``turn.start - 1`` of its row, or the row's
    ``bootstrap_index`` for a truncated end's V(next state))."""

    rows: Tensor  # [P] long, batch row
    positions: Tensor  # [P] long, raw value position in that row
    tokens: Tensor  # [P, Tj] long, right-padded joint contexts
    lengths: Tensor  # [P] long


def joint_inputs(batch: Batch) -> JointInputs:
    """Collect every decision point's joint state (and truncated ends' bootstrap state) of
    ``batch``. ``ValueError`` when a trajectory has no joint states (not a PairTrajectory) or
    more than one segment (PairFix has no compression)."""
    rows, positions, seqs = [], [], []
    for row in range(batch.num_rows):
        traj = batch.trajectories[int(batch.row_traj[row])]
        points = getattr(traj, "joint_points", None)
        seg = batch.segment(row)
        if points is None or len(traj.segments) != 1 or len(points) != len(seg.turns):
            raise ValueError("algo=ppo_ctde needs PairTrajectory rows (one segment, one joint state per turn) "
                             "from the rollout engine on a multi-agent env; use algo=ppo for single-agent envs")
        for turn, ids in zip(seg.turns, points):
            rows.append(row)
            positions.append(turn.start - 1)
            seqs.append(ids)
        if seg.bootstrap_index is not None and traj.joint_bootstrap is not None:
            rows.append(row)
            positions.append(seg.bootstrap_index)
            seqs.append(traj.joint_bootstrap)
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    tokens = torch.zeros(len(seqs), int(lengths.max()) if seqs else 1, dtype=torch.long)
    for i, s in enumerate(seqs):
        tokens[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return JointInputs(torch.tensor(rows, dtype=torch.long), torch.tensor(positions, dtype=torch.long), tokens, lengths)


@register("ppo_independent", critic=True, agents=2, config=PpoIndependentConfig)
class IndependentPPOTrainer(PPOTrainer):
    """PPO for one agent with a local critic (its own context only): the CTDE baseline. The
    update is exactly ``PPOTrainer``'s; the class exists so the name says what runs."""


@register("ppo_ctde", critic=True, agents=2, central_critic=True, config=PpoCtdeConfig)
class CentralCriticPPOTrainer(PPOTrainer):
    """PPO whose critic (``critic``, a separate ``ValueModel`` with ``max_len`` >= the joint
    contexts) reads the joint state of each decision point; the policy reads its own context."""

    def __init__(self, algo, policy, critic=None, reference=None, temperature=1.0, meter=None) -> None:
        if critic is None or policy.value_head is not None:
            raise ValueError("algo=ppo_ctde needs a separate centralized critic and no value head on the policy: "
                             "set policy.critic=separate")
        if algo.value_level != "turn":
            raise ValueError(f"algo.value_level={algo.value_level!r} invalid for ppo_ctde; allowed: turn "
                             "(one joint state per decision point)")
        if algo.critic_epochs:
            raise ValueError(f"algo.critic_epochs={algo.critic_epochs} is not supported by ppo_ctde; allowed: 0 "
                             "(its critic reads joint states, not the actor's rows)")
        super().__init__(algo, policy, critic, reference, temperature, meter)
        self._joint: JointInputs | None = None

    # the actor's forward never touches the critic: decentralized execution
    def forward(self, tokens: Tensor, detach_value: bool = False) -> ForwardOutput:
        logits, _ = self.policy(tokens, detach_value=detach_value)
        return ForwardOutput(logits)

    def forward_at(self, tokens: Tensor, want: Tensor, detach_value: bool = False,
                   value_at: Tensor | None = None) -> ForwardOutput:
        """The actor's logits only before the ``want`` tokens; no values (the centralized critic
        runs on joint states in ``central_raw``, never on an actor's own context)."""
        logits, _ = self.policy.forward_at(tokens, want, detach_value=detach_value)
        return ForwardOutput(logits)

    def _count(self, batch, rows, train, model=None, with_critic=True, width=None, critic_only=False,
               policy_frozen=False) -> None:
        super()._count(batch, rows, train, model=model, with_critic=False, width=width, critic_only=critic_only,
                       policy_frozen=policy_frozen)

    def central_raw(self, rows: Tensor, shape: tuple[int, int], grad: bool) -> Tensor:
        """``[len(rows), T]`` raw values: the centralized critic's value of each joint state of
        ``rows`` at its position (0 elsewhere); counts the critic's FLOPs."""
        j = self._joint
        pick = torch.isin(j.rows, rows)
        idx = torch.nonzero(pick, as_tuple=True)[0]
        out = torch.zeros(len(rows), shape[1])
        if len(idx) == 0:
            return out
        tokens, lengths = j.tokens[idx], j.lengths[idx]
        tokens = tokens[:, : int(lengths.max())]
        with torch.set_grad_enabled(grad):
            values = self.critic(tokens)[torch.arange(len(idx)), lengths - 1]
        slot = torch.full((int(rows.max()) + 1,), -1, dtype=torch.long)
        slot[rows] = torch.arange(len(rows))  # rows come in any order (length buckets)
        local = slot[j.rows[idx]]
        out = out.index_put((local, j.positions[idx]), values)
        add = self.meter.add_train_step if grad else self.meter.add_forward
        add(self.n_critic, int(lengths.sum()), attention_flops(self.critic.shape.n_layers, self.critic.shape.d_model, lengths))
        return out

    def prepare_batch(self, trajectories):
        prepared = super().prepare_batch(trajectories)
        if prepared is None:
            return None
        batch, inputs = prepared
        self._joint = joint_inputs(batch)
        self.critic.eval()
        inputs.old_values = self.central_raw(torch.arange(batch.num_rows), tuple(batch.tokens.shape), grad=False)
        self.critic.train()
        return batch, inputs

    def critic_loss(self, rows: Tensor, values, adv: Advantages, weights: dict):
        """PPO's clipped value loss on the centralized values of the slice's joint states."""
        width = weights["value"].shape[1]  # the slice's columns (rows trimmed to their longest)
        raw = self.central_raw(rows, (len(rows), adv.tokens.shape[1]), grad=True)[:, :width]
        return super().critic_loss(rows, raw, adv, weights)

    def fit_metrics(self, batch: Batch, adv: Advantages, fitted_values) -> dict:
        out = {mk.TRAIN_POLICY_FROZEN: float(self.policy_frozen())}
        vm = adv.value_mask > 0
        if vm.any():
            self.critic.eval()
            fitted = shift_values(self.central_raw(torch.arange(batch.num_rows), tuple(batch.tokens.shape), grad=False))
            out[mk.CRITIC_EXPLAINED_VARIANCE_IN_BATCH] = explained_variance(fitted[vm], adv.returns[vm])
        return out


def pair_rollout_metrics(episodes: list[PairEpisode]) -> dict:
    """Per-agent rollout metrics of the ``PairEpisode``s ``RolloutEngine.collect`` returns for a
    multi-agent env (unmasked episodes; the agents are the episodes' own, in the env's order):

    - ``agent_X/rollout/success``: the verifier's 0/1 (a team outcome, equal for both agents);
    - ``agent_X/rollout/success_bug_in_X_only``: the same on tasks whose bug is only in X's file;
    - ``agent_X/rollout/file_fixed``: X's file computes its reference's outputs at the end;
    - ``agent_X/rollout/turns``: X's turns per episode; ``messages_sent``: X's ``send`` actions
      per episode; ``format_error_rate``: X's turns answered ``format_error``;
    - ``rollout/success`` and ``rollout/episodes`` for the team.
    """
    live = [ep for ep in episodes if not ep.masked]
    out: dict = {mk.ROLLOUT_EPISODES: len(live)}
    if not live:
        return out
    out[mk.ROLLOUT_SUCCESS] = sum(int(ep.final_info.get("verified") or 0) for ep in live) / len(live)
    for a in live[0].by_agent:  # the env's agents, in order
        trajs = agent_trajectories(live, a)
        only = [ep for ep in live if ep.final_info.get("bug_in") == a]
        out[mk.agent_key(a, mk.ROLLOUT_SUCCESS)] = out[mk.ROLLOUT_SUCCESS]
        if only:
            only_key = mk.agent_key(a, mk.member(mk.ROLLOUT_SUCCESS_BUG_IN_ONLY, X=a))
            out[only_key] = sum(int(ep.final_info.get("verified") or 0) for ep in only) / len(only)
        out[mk.agent_key(a, mk.ROLLOUT_FILE_FIXED)] = sum(1 for ep in live if ep.final_info.get(f"file_fixed_{a}")) / len(live)
        out[mk.agent_key(a, mk.ROLLOUT_TURNS)] = sum(t.turns for t in trajs) / len(live)
        out[mk.agent_key(a, mk.ROLLOUT_MESSAGES_SENT)] = sum(t.messages_sent for t in trajs) / len(live)
        n_turns = sum(t.turns for t in trajs)
        errors = sum(1 for t in trajs for seg in t.segments for turn in seg.turns if turn.tool_status == "format_error")
        out[mk.agent_key(a, mk.ROLLOUT_FORMAT_ERROR_RATE)] = errors / n_turns if n_turns else 0.0
    return out


class PairLearner:
    """The one two-agent learner: the trainers of both agents and everything done to them as a
    pair. ``trainers[agent]`` is the trainer updating ``agent``'s policy (the same object for both
    agents with ``shared_policy``; ``owners`` lists each distinct trainer once, under its first
    agent; the keys of ``trainers`` are the env's agents, in order). ``frozen`` agents are not
    updated (their policy stays at its start weights: the non-stationarity control of claim C22).
    Training logic only: no rollouts, files or clocks."""

    def __init__(self, trainers: dict, frozen: tuple[str, ...] = ()) -> None:
        bad = [a for a in frozen if a not in trainers]
        if bad or len(trainers) < 2:
            raise ValueError(f"trainers must map two or more agents and frozen a subset of them; got {list(trainers)} "
                             f"(frozen {list(frozen)})")
        self.trainers = trainers
        self.frozen = tuple(frozen)
        firsts = {id(t): a for a, t in reversed(trainers.items())}
        self.owners: tuple[str, ...] = tuple(a for a in trainers if firsts[id(trainers[a])] == a)
        self.shared = len(self.owners) < len(trainers)

    def models(self) -> dict:
        """``{agent: policy}`` of both agents (one object twice with ``shared_policy``)."""
        return {a: t.policy for a, t in self.trainers.items()}

    def set_budget_fraction(self, fraction: float) -> float:
        """Every trainer's learning rate at budget fraction ``fraction``; returns agent a's."""
        return [self.trainers[a].set_budget_fraction(fraction) for a in self.owners][0]

    def critic_warmup(self) -> bool:
        """Whether the next update of any non-frozen agent's trainer fits its critic only
        (its policy is still frozen by the critic warm-up)."""
        return any(t.policy_frozen() for a, t in self.trainers.items() if a not in self.frozen)

    def update(self, episodes: list[PairEpisode]) -> dict:
        """One update of every non-frozen agent on its own trajectories of ``episodes``; metrics
        ``agent_X/...`` (trainer and rollout) plus the team ``rollout/...``."""
        metrics = pair_rollout_metrics(episodes)
        for owner in self.owners:
            trainer = self.trainers[owner]
            agents = [a for a, t in self.trainers.items() if t is trainer and a not in self.frozen]
            trajs = [ep.for_agent(a) for ep in episodes for a in ep.agents() if a in agents]
            if trajs:
                m = trainer.update(trajs)
                metrics.update({mk.agent_key(a, k): v for a in agents for k, v in m.items()})
        return metrics

    def state_dict(self) -> dict:
        """``{"policy" | "critic" | "trainer": {owner: state dict}}`` of every distinct trainer."""
        t = self.trainers
        return {"policy": {a: t[a].policy.state_dict() for a in self.owners},
                "critic": {a: t[a].critic.state_dict() for a in self.owners},
                "trainer": {a: t[a].state_dict() for a in self.owners}}

    def load_state_dict(self, state: dict) -> None:
        """Restores what :meth:`state_dict` returned (extra keys of ``state`` are ignored);
        ``state["policy"] is None``: the policies are left as they are (restored by the caller from
        another checkpoint form)."""
        for a in self.owners:
            t = self.trainers[a]
            if state["policy"] is not None:
                t.policy.load_state_dict(state["policy"][a])
            t.critic.load_state_dict(state["critic"][a])
            t.load_state_dict(state["trainer"][a])


__all__ = ["CentralCriticPPOTrainer", "IndependentPPOTrainer", "JointInputs", "PairLearner", "PpoCtdeConfig",
           "PpoIndependentConfig", "joint_inputs", "pair_rollout_metrics"]
