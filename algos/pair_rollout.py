"""Rollouts of the two-agent PairFix env: one ``PairTrajectory`` per agent per episode.

Each agent's trajectory is laid out exactly like a single-agent rollout (``algos.batch``'s
``ContextBuilder`` and ``algos.rollout.record_step``, the one layout code path): agent ``i``'s
context is ``[BOS] obs_1 [SEP] act_1 [EOS] obs_2 [SEP] ...`` where ``obs_k`` is
``env.observe(i)`` at its ``k``-th turn (its own last output, then the other's messages and
shared test results since). So the existing trainer steps (collate, PPO's GAE layout, the loss)
apply unchanged to a list of ``PairTrajectory``; the actor only ever reads its own context
(decentralized execution).

Rewards: the team reward of a step is credited to each agent's turn that was open when it
came (``env``'s cumulative reward of the agent since it last acted), so the final reward lands
on both agents' last turns. The episode end is joint: both trajectories end on the same step
with the env's terminated / truncated flags; a context that would overflow ``max_len`` ends
both as ``token_budget`` (truncated). ``collect`` returns one ``PairEpisode`` per request; an
agent that never acted (the other ended the episode on the first turn) has no trajectory (None).

For the centralized critic (``algos.ppo_ctde``), every decision point of agent ``i`` also
records the **joint state**: ``joint_context(own, other) = own context up to its decision (it
ends with the [SEP] after the observation) + the other agent's context so far (without its BOS)
+ [SEP]``: both agents' contexts, hence both files as far as they were viewed, every message
and every test result. ``PairTrajectory.joint_points[k]`` is the joint state at turn ``k``;
``joint_bootstrap`` the one after the final observation of a truncated end (V(next state)).

Generation is batched over the slots acting with the same model and decodes incrementally: each
model has one KV cache (``PolicyModel.new_cache``) with a row per (slot, agent) of a chunk of
``num_envs`` episodes; a row always holds a prefix of that agent's context, so an agent's turn
feeds only the ids appended since its last one (the observation, or the whole first context) and
then one id per sampled token (``PolicyModel.step_last``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import envs
from algos.batch import ContextBuilder, Trajectory
from algos.policy import PolicyModel
from algos.rollout import RolloutRequest, record_step
from envs.pairfix import AGENTS, other
from envs.stop import StopReason
from envs.tokenizer import get_tokenizer


@dataclass
class PairTrajectory(Trajectory):
    """A ``Trajectory`` of one agent of a two-agent episode (one segment: no compression)."""

    agent: str = "a"
    pair_index: int = 0  # request index of the episode (both agents' trajectories share it)
    joint_points: list[list[int]] = field(default_factory=list)  # per turn: the joint state's ids
    joint_bootstrap: list[int] | None = None  # truncated end: joint state after the final observation
    messages_sent: int = 0  # turns whose action was ``send ...``
    messages_received: list[str] = field(default_factory=list)  # the other's messages, in order


@dataclass(frozen=True)
class PairEpisode:
    """One two-agent episode: agent ``a``'s and agent ``b``'s trajectory, None for an agent that
    never acted (the other ended the episode on the first turn)."""

    a: PairTrajectory | None
    b: PairTrajectory | None

    def for_agent(self, name: str) -> PairTrajectory | None:
        """The trajectory of agent ``name`` (one of ``envs.pairfix.AGENTS``); ``KeyError`` otherwise."""
        if name not in AGENTS:
            raise KeyError(f"agent {name!r} unknown; allowed: {', '.join(AGENTS)}")
        return getattr(self, name)

    def agents(self) -> tuple[str, ...]:
        """The names of the agents that acted, in ``AGENTS`` order."""
        return tuple(a for a in AGENTS if getattr(self, a) is not None)

    def trajectories(self) -> tuple[PairTrajectory, ...]:
        """The trajectories of the agents that acted, in ``AGENTS`` order."""
        return tuple(getattr(self, a) for a in self.agents())

    @property
    def masked(self) -> bool:
        """True when a trajectory of the episode is masked (no loss, no score)."""
        return any(t.masked for t in self.trajectories())

    @property
    def final_info(self) -> dict:
        """The env's final info of the first agent that acted: the team's outcome (``verified``,
        ``bug_in``, ``file_fixed_<agent>``), equal for both agents."""
        return self.trajectories()[0].final_info


def joint_context(own: ContextBuilder, other_builder: ContextBuilder | None, sep: int) -> list[int]:
    """The centralized critic's input at ``own``'s current position (see the module docstring)."""
    theirs = other_builder.seg.tokens[1:] if other_builder is not None and other_builder.segments else []
    return list(own.seg.tokens) + list(theirs) + [sep]


@dataclass
class _PairSlot:
    request_index: int
    row: int  # position in its chunk: agent ``AGENTS[k]`` decodes in cache row ``2 * row + k``
    env: object
    trajs: dict
    builders: dict = field(default_factory=lambda: dict.fromkeys(AGENTS))
    open_turn: dict = field(default_factory=lambda: dict.fromkeys(AGENTS))
    scripted: dict = field(default_factory=dict)  # agent -> scripted agent instance of this episode
    fed: dict = field(default_factory=lambda: dict.fromkeys(AGENTS, 0))  # agent -> context ids in its cache row
    done: bool = False

    def cache_row(self, agent: str) -> int:
        return 2 * self.row + AGENTS.index(agent)


class PairRolloutEngine:
    """``collect(models, requests, policy_version, generator) -> list[PairEpisode]``.

    ``models[agent]`` is the policy acting for ``agent`` (the same object for both with a shared
    policy), or a zero-argument factory of a scripted agent (``envs.pairfix.agents``: one instance
    per episode, ``reset(env, name, seed)`` / ``act(observation)``): its actions are laid out as
    demonstrations (behavior log-prob 0, policy version -1, ``temperature=None``), the same way
    ``algos.rollout.demo_to_trajectory`` does. Requests are run ``num_envs`` at a time, in request
    order."""

    def __init__(self, num_envs: int, max_len: int, max_action_tokens: int = 12, temperature: float = 1.0,
                 env_kwargs: dict | None = None, env_id: str = envs.PAIRFIX_ID) -> None:
        if num_envs < 1:
            raise ValueError(f"rollout.num_envs={num_envs} invalid; allowed: an int >= 1")
        if temperature <= 0:
            raise ValueError(f"rollout.temperature={temperature} invalid; allowed: > 0 (training samples)")
        self.num_envs, self.max_len, self.max_action_tokens = num_envs, max_len, max_action_tokens
        self.temperature = temperature
        self.tok = get_tokenizer()
        self.envs = [envs.make_multi_agent(env_id, **(env_kwargs or {})) for _ in range(num_envs)]

    def collect(self, models: dict, requests: list[RolloutRequest], policy_version: int = 0,
                generator: torch.Generator | None = None) -> list[PairEpisode]:
        missing = [a for a in AGENTS if a not in models]
        if missing:
            raise ValueError(f"models lacks agent(s) {missing}; allowed keys: {', '.join(AGENTS)}")
        out: list[PairEpisode] = []
        for start in range(0, len(requests), self.num_envs):
            chunk = requests[start: start + self.num_envs]
            slots = [self._reset(self.envs[b], b, start + b, req, policy_version, models) for b, req in enumerate(chunk)]
            caches = {id(m): m.new_cache(2 * len(chunk)) for m in models.values() if isinstance(m, torch.nn.Module)}
            with torch.no_grad():
                while not all(s.done for s in slots):
                    self._joint_step(models, caches, [s for s in slots if not s.done], policy_version, generator)
            for s in slots:
                out.append(PairEpisode(**{a: (t if t.segments else None) for a, t in s.trajs.items()}))
        return out

    # -----------------------------------------------------------------------------------------
    def _reset(self, env, row: int, index: int, req: RolloutRequest, version: int, models: dict) -> _PairSlot:
        env.reset(seed=req.seed, options=req.options)
        task_id = env.infos["a"]["task_id"]
        scripted = {a: models[a]() for a in AGENTS if not isinstance(models[a], torch.nn.Module)}
        for a, agent in scripted.items():
            agent.reset(env, a, req.seed)
        trajs = {a: PairTrajectory(task_id=task_id, group_id=req.group_id, index=index, seed=req.seed,
                                   options=req.options, policy_version=-1 if a in scripted else version,
                                   temperature=None if a in scripted else self.temperature,
                                   agent=a, pair_index=index) for a in AGENTS}
        return _PairSlot(index, row, env, trajs, scripted=scripted)

    def _joint_step(self, models: dict, caches: dict, slots: list[_PairSlot], version: int, generator) -> None:
        """Every live slot's ``agent_selection`` reads its observation and acts once."""
        room = self.max_action_tokens + 2
        acting: list[tuple[_PairSlot, str]] = []
        for s in slots:
            a = s.env.agent_selection
            obs = s.env.observe(a)
            if s.open_turn[a] is not None:
                kind, _ = record_step(s.builders[a], s.trajs[a], s.open_turn[a], obs, s.env.cumulative_reward(a), False, False,
                                      s.env.infos[a], self.max_action_tokens)
                s.open_turn[a] = None
                if kind == "done":  # the context is full: the episode is cut for both agents
                    self._cut(s, a)
                    continue
            else:
                s.builders[a] = ContextBuilder(self.max_len)
                s.builders[a].start_segment(self.tok.encode(obs), "reset", room=room)
            s.trajs[a].messages_received.extend(line.split(" : ", 1)[1] for line in obs.split("\n")
                                                if line.startswith(f"message from {other(a)} : "))
            s.trajs[a].joint_points.append(joint_context(s.builders[a], s.builders[other(a)], self.tok.sep_id))
            acting.append((s, a))
        by_model: dict[int, list[tuple[_PairSlot, str]]] = {}
        for s, a in acting:
            by_model.setdefault(id(models[a]), []).append((s, a))
        for group in by_model.values():
            if group[0][1] in group[0][0].scripted:
                actions = [self._scripted(s, a) for s, a in group]
            else:
                model = models[group[0][1]]
                actions = self._generate(model, caches[id(model)], group, version, generator)
            for (s, a), (words, capped) in zip(group, actions):
                s.trajs[a].generated_tokens += len(words) + (0 if capped else 1)
                s.open_turn[a] = s.builders[a].end_action(capped)
                text = self.tok.decode(words)
                if text.split(" ")[0] == "send":
                    s.trajs[a].messages_sent += 1
                s.env.step(text)
                if s.env.terminations[a] or s.env.truncations[a]:  # the joint end
                    self._finish(s)

    def _scripted(self, s: _PairSlot, a: str) -> tuple[list[int], bool]:
        """The scripted agent's action, appended to its context as a demonstration."""
        words = self.tok.encode(s.scripted[a].act(s.env.observe(a)))
        if len(words) > self.max_action_tokens:
            raise ValueError(f"scripted action has {len(words)} words > max_action_tokens={self.max_action_tokens}")
        for w in words + [self.tok.eos_id]:
            s.builders[a].add_sampled(w, 0.0, -1)
        return words, False

    def _generate(self, model: PolicyModel, cache, acting: list[tuple[_PairSlot, str]], version: int, generator):
        """Sample one action per acting (slot, agent), appended to its context; returns
        ``[(words, capped)]``. The first forward feeds each cache row the context ids it lacks;
        each later one the token sampled last (rows whose action ended are left out)."""
        was_training = model.training
        model.eval()
        n = len(acting)
        builders = [s.builders[a] for s, a in acting]
        words: list[list[int]] = [[] for _ in range(n)]
        live = list(range(n))
        capped = [False] * n
        for step in range(self.max_action_tokens):
            new = []
            for i in live:
                s, a = acting[i]
                tokens = builders[i].seg.tokens
                new.append(tokens[s.fed[a]:])
                s.fed[a] = len(tokens)
            n_new = torch.tensor([len(x) for x in new])
            inp = torch.zeros(len(live), int(n_new.max()), dtype=torch.long)
            for r, x in enumerate(new):
                inp[r, : len(x)] = torch.tensor(x, dtype=torch.long)
            rows = torch.tensor([acting[i][0].cache_row(acting[i][1]) for i in live])
            last = model.step_last(cache, inp, n_new, rows).float()
            lp = torch.log_softmax(last / self.temperature, dim=-1)
            sampled = torch.multinomial(lp.exp(), 1, generator=generator).squeeze(-1)
            logps = lp.gather(-1, sampled[:, None]).squeeze(-1)
            still = []
            for r, i in enumerate(live):
                token = int(sampled[r])
                builders[i].add_sampled(token, float(logps[r]), version)
                if token == self.tok.eos_id:
                    continue
                words[i].append(token)
                if step == self.max_action_tokens - 1:
                    capped[i] = True
                else:
                    still.append(i)
            live = still
            if not live:
                break
        if was_training:
            model.train()
        return list(zip(words, capped))

    def _finish(self, s: _PairSlot) -> None:
        """The env ended the episode: close both agents' open turns with the final results."""
        env = s.env
        for a in AGENTS:
            if s.open_turn[a] is None:
                continue
            term, trunc = env.terminations[a], env.truncations[a]
            kind, _ = record_step(s.builders[a], s.trajs[a], s.open_turn[a], env.observe(a), env.cumulative_reward(a), term, trunc,
                                  env.infos[a], self.max_action_tokens)
            s.open_turn[a] = None
            self._bootstrap_state(s, a)
        s.done = True

    def _cut(self, s: _PairSlot, agent: str) -> None:
        """``agent``'s context is full (``record_step`` ended its trajectory as token_budget): end
        the other's trajectory the same way at its current observation."""
        self._bootstrap_state(s, agent)
        b = other(agent)
        if s.open_turn[b] is not None:
            info = dict(s.env.infos[b])
            info.update(stop_reason=StopReason.TOKEN_BUDGET.value, masked=False, verified=0, engine_truncated=True)
            record_step(s.builders[b], s.trajs[b], s.open_turn[b], s.env.observe(b), s.env.cumulative_reward(b),
                        False, True, info, self.max_action_tokens)
            s.open_turn[b] = None
            self._bootstrap_state(s, b)
        s.done = True

    def _bootstrap_state(self, s: _PairSlot, a: str) -> None:
        traj = s.trajs[a]
        seg = traj.segments[-1] if traj.segments else None
        if seg is not None and seg.end == "truncated" and seg.bootstrap_index is not None:
            theirs = s.builders[other(a)]
            tail = theirs.seg.tokens[1:] if theirs is not None and theirs.segments else []
            traj.joint_bootstrap = list(seg.tokens[: seg.bootstrap_index + 1]) + list(tail) + [self.tok.sep_id]


def pair_requests(n: int, seed: int, split: str = "train", task_indices: list[int] | None = None) -> list[RolloutRequest]:
    """``n`` requests over ``task_indices`` (cycled; default ``0..n-1``), seeds ``seed + k``."""
    idx = task_indices if task_indices is not None else list(range(n))
    return [RolloutRequest(options={"split": split, "task_index": int(idx[k % len(idx)])}, seed=seed + k, group_id=k)
            for k in range(n)]


def agent_trajectories(episodes: list[PairEpisode], agent: str) -> list[PairTrajectory]:
    """``agent``'s trajectories of ``episodes`` (the output of ``collect``), skipping None."""
    return [t for t in (ep.for_agent(agent) for ep in episodes) if t is not None]


__all__ = ["PairEpisode", "PairRolloutEngine", "PairTrajectory", "agent_trajectories", "joint_context",
           "pair_requests"]
