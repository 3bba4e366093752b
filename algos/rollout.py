"""Batched rollout engine: many env instances in lockstep, one forward per generated token.

The model is a policy backend (``algos.backend``: a ``PolicyModel`` is wrapped in ``TinyBackend``;
``algos.hf_backend.HFPolicy`` for a Hugging Face causal LM). Each of ``num_envs`` slots holds one
env and one row of the backend's sampling cache. Every engine step samples one token for every
busy slot with ONE call ``backend.step_last`` over all slots with ragged ``n_new`` (for the tiny
policy one packed forward: the per-token layers run on the real new tokens only). A decoding slot
feeds its last sampled token; a slot whose action just ended feeds that action's last token (and
the ``capped_close`` ids of a capped action) and ``layout.next(obs)`` (word layout: ``obs [SEP]``);
a slot that was just reset or compressed feeds ``layout.first(obs)`` (``[BOS] obs [SEP]``) into
an emptied cache row. The logits at each row's last fed token give its next sampled token
(``timing["prefill_forwards"]`` counts the steps in which some slot fed more than one token). A slot whose trajectory ends is refilled
with the next request (continuous batching).

Agents: a PettingZoo env (``possible_agents``) gives the engine an agent dimension
(``RolloutEngine``'s docstring): each slot has a seat per agent with its own cache row
(``slot * n_agents + k``), only the agent whose turn it is feeds and samples, every policy runs one
``step_last`` per engine step over its rows and the one sampler draws its tokens; a scripted agent
acts without a forward. A one-agent env is the case of one seat.

An action is the sampled ids up to an end id of the layout (sampled, action_mask 1; word layout:
EOS) or up to ``max_action_tokens`` ids (then the env-written ``capped_close`` ids close it,
action_mask 0). Its text is ``layout.action_text`` of the sampled ids, passed to ``env.step``.

Context limit: a segment never exceeds ``max_len`` tokens. When the next observation plus one
more full action would not fit, the engine stops the episode as ``token_budget`` (an outside
limit: truncated, scored 0, bootstrapped in PPO from V(next state)); the final observation is then
cut from the front to fit.

Everything of ``algos.batch``'s data model is recorded: segments with start/end kinds and the
continuation context, action mask, behavior log-probs at the sampling temperature, policy
versions, per-turn rewards / tool status, stop reason, verified score, hack flags and compute.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import torch

import envs
from algos.backend import WORD_LAYOUT, ContextLayout, PolicyBackend, as_backend
from algos.batch import ContextBuilder, Trajectory, Turn
from algos.pair_rollout import PairEpisode, PairTrajectory, is_message, joint_context, received_messages
from algos.policy import PolicyModel, sample_categorical
from algos.recording import record_step, state_key_of
from algos.requests import RolloutRequest
from envs.compression import CompressionSettings
from envs.stop import StopReason


@dataclass
class _Seat:
    """One agent's side of a slot (a one-agent env has one seat): its trajectory and context, its
    cache row (``slot * n_seats + k``), its policy (``group``: index into ``_Collection.backends``;
    None: the episode's ``scripted`` agent acts), the ids its cache row has not been fed yet, its
    open turn (an action whose result it has not read yet) and the info of the state it acts in."""

    agent: str
    row: int
    traj: Trajectory
    layout: ContextLayout
    group: int | None
    scripted: object | None = None
    builder: ContextBuilder | None = None
    pending: list[int] = field(default_factory=list)
    open_turn: Turn | None = None
    last_info: dict = field(default_factory=dict)


@dataclass
class _Slot:
    request_index: int
    seats: list[_Seat]
    acting: int = 0  # the seat whose action is being sampled
    action_len: int = 0
    forced: deque = field(default_factory=deque)  # tokens still to feed instead of sampling
    reseed: int | None = None  # applied before the first sampled token, then None

    @property
    def seat(self) -> _Seat:
        return self.seats[self.acting]


@dataclass
class _Collection:
    """The state of one ``RolloutEngine.collect`` call: the requests still queued, one slot per env
    (None: idle), the results finished so far (request order), the policies of the agents
    (``backends``, one sampling cache each with one row per (slot, agent); ``policies[k]``: the
    group of agent ``k``, or its scripted-agent factory) and the time spent in model forwards and
    env calls."""

    backends: list[PolicyBackend]
    caches: list
    policies: list
    requests: list[RolloutRequest]
    policy_version: int
    generator: torch.Generator | None
    temperature: float
    trace: list | None
    queue: deque
    out: list
    slots: list[_Slot | None]
    layout: ContextLayout | None = None  # scripted agents' layout (None: the policies', else the word layout)
    t_model: float = 0.0
    t_env: float = 0.0
    n_forwards: int = 0
    n_prefill: int = 0


class RolloutEngine:
    """``collect(model, requests, policy_version, generator)``: one ``Trajectory`` per request of a
    one-agent env, one ``PairEpisode`` per request of a multi-agent env (request order).

    ``make_env`` (a zero-argument factory of one env) replaces ``envs.make(env_id, ...)``: a
    PettingZoo ``AECEnv`` (it has ``possible_agents``) gives the engine an agent dimension. Its
    agents act in the env's turn order (``agent_selection``); each reads only its own context
    (``PairTrajectory``, laid out like a one-agent rollout: ``first(obs_1) a_1 next(obs_2) ...``
    with ``obs_k = env.observe(agent)`` at its ``k``-th turn) in its own cache row. A turn's reward
    is the agent's cumulative reward since its last action (``env._cumulative_rewards``), read at
    its next turn or at the end; the end is joint (every agent's open turn is closed with the
    env's final flags), and a context that would overflow ends every agent's trajectory as
    ``token_budget``. Every decision point also records the joint state for a centralized critic
    (``algos.pair_rollout.joint_context``)."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        max_len: int,
        max_action_tokens: int = 16,
        temperature: float = 1.0,
        env_kwargs: dict | None = None,
        compression: CompressionSettings | dict | None = None,
        make_env: Callable[[], object] | None = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"rollout.num_envs={num_envs} must be >= 1")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        if make_env is None:
            make_env = partial(envs.make, env_id, compression=compression, **self.env_kwargs)
        self.envs = [make_env() for _ in range(num_envs)]
        agents = getattr(self.envs[0], "possible_agents", None)
        #: the agents of a multi-agent env (its ``possible_agents``), None for a one-agent env
        self.agents: tuple[str, ...] | None = tuple(agents) if agents is not None else None
        self.num_envs = num_envs
        self.max_len = max_len
        self.max_action_tokens = max_action_tokens
        self.temperature = temperature
        # timing of the last collect (seconds): model forwards vs env steps vs the rest
        self.timing: dict[str, float] = {}

    def close(self) -> None:
        for env in self.envs:
            env.close()

    @property
    def seats(self) -> int:
        """Agents per env: ``len(agents)``, 1 for a one-agent env."""
        return len(self.agents) if self.agents is not None else 1

    # -----------------------------------------------------------------------------------------
    def collect(
        self,
        model,
        requests: list[RolloutRequest],
        policy_version: int = 0,
        generator: torch.Generator | None = None,
        temperature: float | None = None,
        trace: list | None = None,
        layout: ContextLayout | None = None,
    ) -> list:
        """Generate one result per request (returned in request order). ``model``: a
        ``PolicyModel`` or a policy backend (``algos.backend.as_backend``); for a multi-agent env
        also ``{agent: policy or scripted-agent factory}`` (see :meth:`_policies`). ``layout``: the
        layout scripted agents' turns are written in (None: the policies', the word layout when
        every agent is scripted; a warm start's demonstrations for a policy of that layout). ``trace``: when
        a list, every forward's inputs are appended to it (for the benchmark's raw replay). The
        modules run in eval mode under ``torch.no_grad`` and are put back in training mode if they
        were in it."""
        policies = self._policies(model)
        backends = list({id(p): p for p in policies if isinstance(p, PolicyBackend)}.values())
        policies = [next(g for g, b in enumerate(backends) if b is p) if isinstance(p, PolicyBackend) else p
                    for p in policies]
        training = [b.module.training for b in backends]
        for b in backends:
            b.module.eval()
        t_start = time.perf_counter()
        run = _Collection(backends=backends, caches=[b.new_cache(self.num_envs * self.seats) for b in backends],
                          policies=policies, requests=requests, policy_version=policy_version, generator=generator,
                          temperature=self.temperature if temperature is None else temperature, trace=trace,
                          queue=deque(range(len(requests))), out=[None] * len(requests), slots=[None] * self.num_envs,
                          layout=layout)
        for b in range(self.num_envs):
            self._refill(run, b)
        with torch.no_grad():
            while any(s is not None for s in run.slots):
                self._engine_step(run)
        for b, was_training in zip(backends, training):
            if was_training:
                b.module.train()
        self.timing = {"total": time.perf_counter() - t_start, "model": run.t_model, "env": run.t_env,
                       "forwards": run.n_forwards, "prefill_forwards": run.n_prefill}
        return run.out

    def _policies(self, model) -> list:
        """Per seat: its backend, or a zero-argument factory of a scripted agent (one instance per
        episode, ``reset(env, agent, seed)`` / ``act(observation) -> str``; its actions are laid out
        as demonstrations: behavior log-prob 0, policy version -1, temperature None). One policy
        object for several agents is one backend (one forward for all their rows)."""
        if self.agents is None:
            return [as_backend(model)]
        per_agent = model if isinstance(model, dict) else dict.fromkeys(self.agents, model)
        missing = [a for a in self.agents if a not in per_agent]
        if missing:
            raise ValueError(f"models lacks agent(s) {missing}; allowed keys: {', '.join(self.agents)}")
        wrapped: dict[int, PolicyBackend] = {}
        out = []
        for a in self.agents:
            m = per_agent[a]
            if isinstance(m, PolicyModel) or isinstance(m, PolicyBackend):
                out.append(wrapped.setdefault(id(m), as_backend(m)))
            elif callable(m):
                out.append(m)
            else:
                raise ValueError(f"model of agent {a!r} is a {type(m).__name__}; allowed: a PolicyModel, a policy "
                                 "backend or a zero-argument scripted-agent factory")
        return out

    # -----------------------------------------------------------------------------------------
    def _refill(self, run: _Collection, b: int) -> None:
        """Empty slot ``b``; start queued requests in it until one leaves a policy to act (an
        episode that scripted agents play to its end is finished here)."""
        run.slots[b] = None
        while run.queue:
            s = self._start(run, b, run.queue.popleft())
            if not self._play_scripted(run, b, s):
                run.slots[b] = s
                return
            self._done(run, s)

    def _start(self, run: _Collection, b: int, i: int) -> _Slot:
        """Reset env ``b`` for request ``i``, empty the slot's cache rows and lay out the first
        context of the agent to act (``layout.first(obs)``)."""
        req = run.requests[i]
        env = self.envs[b]
        t0 = time.perf_counter()
        reset = env.reset(seed=req.seed, options=req.options)
        run.t_env += time.perf_counter() - t0
        rows = [b * self.seats + k for k in range(self.seats)]
        for cache in run.caches:
            cache.reset_rows(rows)
        if run.trace is not None:
            run.trace.extend(("reset", r, None, None) for r in rows)
        s = _Slot(i, [self._seat(run, env, req, i, k, rows[k]) for k in range(self.seats)], forced=deque(req.forced),
                  reseed=req.reseed)
        if self.agents is None:
            obs, info = reset
            s.seat.traj.task_id = str(info.get("task_id", ""))
            self._open(s.seat, obs, info)
        else:
            self._begin_turn(run, b, s)
        return s

    def _seat(self, run: _Collection, env, req: RolloutRequest, i: int, k: int, row: int) -> _Seat:
        """Seat ``k`` of a new episode: an empty trajectory; a scripted agent is built and reset."""
        policy = run.policies[k]
        if self.agents is None:
            traj = Trajectory(group_id=req.group_id, index=i, seed=req.seed, options=req.options,
                              policy_version=run.policy_version, temperature=run.temperature)
            return _Seat("", row, traj, run.backends[policy].layout, policy)
        agent = self.agents[k]
        scripted = policy() if not isinstance(policy, int) else None
        if scripted is not None:
            scripted.reset(env, agent, req.seed)
        traj = PairTrajectory(task_id=str(env.infos[agent].get("task_id", "")), group_id=req.group_id, index=i,
                              seed=req.seed, options=req.options, agent=agent, pair_index=i,
                              policy_version=-1 if scripted else run.policy_version,
                              temperature=None if scripted else run.temperature)
        layout = run.backends[policy].layout if scripted is None else _scripted_layout(run)
        return _Seat(agent, row, traj, layout, None if scripted else policy, scripted)

    def _open(self, seat: _Seat, obs: str, info: dict) -> None:
        """Open the seat's first segment: ``layout.first(obs)``, cut to leave room for an action."""
        seat.builder = ContextBuilder(self.max_len)
        first = seat.layout.first(obs, self.max_len - (self.max_action_tokens + 2))[0]
        seat.pending = seat.builder.open_segment(first, "reset")
        seat.last_info = info

    def _done(self, run: _Collection, s: _Slot) -> None:
        """Slot ``s``'s episode ended: its trajectory (one agent) or ``PairEpisode`` (an agent that
        never acted has None) goes to ``run.out``."""
        if self.agents is None:
            run.out[s.request_index] = s.seat.traj
        else:
            run.out[s.request_index] = PairEpisode({x.agent: x.traj if x.traj.segments else None for x in s.seats})

    def _engine_step(self, run: _Collection) -> None:
        """One engine step: per policy one ``step_last`` over its rows and one sampled token per
        row (``_sample``), then each busy slot's acting seat takes its token, in slot order
        (``_take_token``)."""
        t0 = time.perf_counter()
        picks: dict[int, tuple] = {}
        for g, backend in enumerate(run.backends):
            inp, n_new = _pack_pending(run.slots, g, self.seats)
            if not bool(n_new.any()):
                continue
            if inp.shape[1] > 1:
                run.n_prefill += 1
            logits = backend.step_last(run.caches[g], inp, n_new)
            if run.trace is not None:
                run.trace.append(("decode", inp, n_new, None))
            sampled, logps, lp_all = self._sample(logits, run.temperature, run.generator)
            run.n_forwards += 1
            for b, s in enumerate(run.slots):
                if s is not None and s.seat.group == g:
                    picks[b] = (sampled[s.seat.row], logps[s.seat.row], lp_all, s.seat.row)
        run.t_model += time.perf_counter() - t0
        for b, s in enumerate(run.slots):
            if s is not None:
                self._take_token(run, b, s, *picks[b])

    def _sample(self, logits: torch.Tensor, temp: float,
                generator: torch.Generator | None) -> tuple[list[int], list[float], torch.Tensor | None]:
        """``(tokens, log-probs, lp_all)`` of one row each: at ``temp > 0`` one draw from
        ``generator`` (``sample_categorical``) over the log-softmax of ``logits / temp`` (``lp_all``);
        at ``temp == 0`` the argmax, log-prob 0 and ``lp_all`` None (greedy: evaluation only)."""
        if temp > 0:
            lp_all = torch.log_softmax(logits.float() / temp, dim=-1)
            sampled = sample_categorical(lp_all, generator)
            logps = lp_all.gather(-1, sampled[:, None]).squeeze(-1)
        else:
            lp_all = None
            sampled = logits.argmax(-1)
            logps = torch.zeros(logits.shape[0])
        return sampled.tolist(), logps.tolist(), lp_all

    def _take_token(self, run: _Collection, b: int, s: _Slot, token: int, logp: float,
                    lp_all: torch.Tensor | None, row: int) -> None:
        """Record the acting seat's next token: its next forced token (log-prob from ``lp_all``) or
        else the sampled ``token`` (re-seeding the env's tools first when the slot holds a
        ``reseed``). An end id or the ``max_action_tokens``-th token closes the action
        (``_finish_action``, then any scripted agents' turns); a finished episode goes to
        ``run.out`` and the slot is refilled."""
        seat = s.seat
        if s.forced:
            token = s.forced.popleft()
            logp = float(lp_all[row, token]) if run.temperature > 0 else 0.0
        elif s.reseed is not None:
            reseed_tools(self.envs[b], s.reseed)
            s.reseed = None
        seat.builder.add_sampled(token, logp, run.policy_version)
        seat.traj.generated_tokens += 1
        s.action_len += 1
        is_eos = token in seat.layout.end_ids
        if not is_eos and s.action_len < self.max_action_tokens:
            seat.pending = [token]
            return
        t0 = time.perf_counter()
        done = self._finish_action(run, b, s, capped=not is_eos) or self._play_scripted(run, b, s)
        run.t_env += time.perf_counter() - t0
        if done:
            self._done(run, s)
            self._refill(run, b)

    def _play_scripted(self, run: _Collection, b: int, s: _Slot) -> bool:
        """Play the turns of scripted seats until a policy is to act; True when the episode ended."""
        while s.seat.group is None:
            seat = s.seat
            ids = seat.layout.action_ids(seat.scripted.act(self.envs[b].observe(seat.agent)))
            if len(ids) - 1 > self.max_action_tokens:
                raise ValueError(f"scripted action has {len(ids) - 1} tokens > max_action_tokens={self.max_action_tokens}")
            for w in ids:
                seat.builder.add_sampled(w, 0.0, -1)
            seat.traj.generated_tokens += len(ids)
            if self._finish_action(run, b, s, capped=False):
                return True
        return False

    # -----------------------------------------------------------------------------------------
    def _finish_action(self, run: _Collection, b: int, s: _Slot, capped: bool) -> bool:
        """Close the action, step the env, lay out what the next agent sees. True when done."""
        seat = s.seat
        builder, layout = seat.builder, seat.layout
        close = layout.capped_close
        turn = builder.end_action(capped, close)
        turn.state_key = state_key_of(seat.last_info)  # the state the action was chosen in
        seg = builder.seg
        sampled = seg.tokens[turn.start: turn.end + 1]
        # the tokens not yet fed to the model: the last sampled one (+ the closing ids when capped)
        last_fed = seg.tokens[-(1 + len(close) if capped else 1):]
        text = layout.action_text(sampled, capped)
        s.action_len = 0
        if self.agents is not None:
            seat.open_turn, seat.pending = turn, last_fed
            seat.traj.messages_sent += int(is_message(text))
            self.envs[b].step(text)
            return self._after_step(run, b, s)
        obs, reward, terminated, truncated, info = self.envs[b].step(text)
        seat.last_info = info
        kind, ids = record_step(builder, seat.traj, turn, obs, reward, terminated, truncated, info,
                                self.max_action_tokens, layout)
        return self._lay_next(run, seat, kind, ids, last_fed)

    def _lay_next(self, run: _Collection, seat: _Seat, kind: str, ids: list[int], last_fed: list[int]) -> bool:
        """The seat's ids to feed after ``record_step`` returned ``(kind, ids)``: a new segment
        empties its cache row. True when the trajectory ended."""
        if kind == "done":
            return True
        if kind == "compressed":
            run.caches[seat.group].reset_rows([seat.row])
            if run.trace is not None:
                run.trace.append(("reset", seat.row, None, None))
            seat.pending = ids
        else:
            seat.pending = last_fed + ids
        return False

    # ----------------------------------------------------------------------------------------- multi-agent
    def _after_step(self, run: _Collection, b: int, s: _Slot) -> bool:
        """After an agent's action: at the joint end every open turn is closed with the env's
        final flags (True); else the next agent's turn begins."""
        env = self.envs[b]
        agent = s.seat.agent
        if not (env.terminations[agent] or env.truncations[agent]):
            return self._begin_turn(run, b, s)
        for seat in s.seats:
            if seat.open_turn is not None:
                a = seat.agent
                self._close(env, seat, env.terminations[a], env.truncations[a], env.infos[a])
        self._joint_bootstraps(s)
        return True

    def _begin_turn(self, run: _Collection, b: int, s: _Slot) -> bool:
        """``agent_selection`` reads its observation: its first context, or its last turn's result
        appended (``record_step``); records the joint state. True when its context overflowed
        (every agent's trajectory is then cut as ``token_budget``)."""
        env = self.envs[b]
        s.acting = self.agents.index(env.agent_selection)
        seat = s.seat
        obs, info = env.observe(seat.agent), env.infos[seat.agent]
        if seat.builder is None:
            self._open(seat, obs, info)
        else:
            kind, ids = record_step(seat.builder, seat.traj, seat.open_turn, obs, env._cumulative_rewards[seat.agent],
                                    False, False, info, self.max_action_tokens, seat.layout)
            seat.open_turn, seat.last_info = None, info
            if kind == "done":
                self._cut(env, s)
                return True
            self._lay_next(run, seat, kind, ids, seat.pending)
        seat.traj.messages_received.extend(received_messages(obs, [x.agent for x in s.seats if x is not seat]))
        seat.traj.joint_points.append(joint_context(seat.builder, [x.builder for x in s.seats if x is not seat],
                                                    seat.layout.next("")))
        return False

    def _close(self, env, seat: _Seat, terminated: bool, truncated: bool, info: dict) -> None:
        record_step(seat.builder, seat.traj, seat.open_turn, env.observe(seat.agent),
                    env._cumulative_rewards[seat.agent], terminated, truncated, info, self.max_action_tokens,
                    seat.layout)
        seat.open_turn = None

    def _cut(self, env, s: _Slot) -> None:
        """One agent's context is full (``record_step`` ended it as token_budget): end every other
        agent's trajectory the same way at its current observation."""
        for seat in s.seats:
            if seat.open_turn is not None:
                info = dict(env.infos[seat.agent])
                info.update(stop_reason=StopReason.TOKEN_BUDGET.value, masked=False, verified=0, engine_truncated=True)
                self._close(env, seat, False, True, info)
        self._joint_bootstraps(s)

    @staticmethod
    def _joint_bootstraps(s: _Slot) -> None:
        """A truncated end's joint state after the final observation (V(next state))."""
        for seat in s.seats:
            seg = seat.traj.segments[-1] if seat.traj.segments else None
            if seg is not None and seg.end == "truncated" and seg.bootstrap_index is not None:
                seat.traj.joint_bootstrap = joint_context(
                    seat.builder, [x.builder for x in s.seats if x is not seat], seat.layout.next(""),
                    own_end=seg.bootstrap_index + 1)


def _scripted_layout(run: _Collection) -> ContextLayout:
    """The layout a scripted agent's demonstration is written in: ``collect``'s ``layout`` when
    given, else the policies' (the word layout when every agent is scripted)."""
    if run.layout is not None:
        return run.layout
    return run.backends[0].layout if run.backends else WORD_LAYOUT


def _pack_pending(slots: list[_Slot | None], group: int, seats: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inp [len(slots) * seats, width], n_new)``: the pending tokens of every busy slot whose
    acting seat samples with policy ``group`` (one sampled token, or an observation / a new
    segment's context) in that seat's cache row, right-padded with 0 to the longest; any other row
    feeds nothing (``n_new`` 0; one pad 0 when ``width`` is 1)."""
    pending: list[list[int]] = [[] for _ in range(len(slots) * seats)]
    for s in slots:
        if s is not None and s.seat.group == group:
            pending[s.seat.row] = s.seat.pending
    lens = [len(p) for p in pending]
    width = max(lens)
    if width == 1:
        inp = torch.tensor([[p[0] if p else 0] for p in pending], dtype=torch.long)
    else:
        inp = torch.tensor([p + [0] * (width - n) for p, n in zip(pending, lens)], dtype=torch.long)
    return inp, torch.tensor(lens, dtype=torch.long)


def has_tool_stream(env) -> bool:
    """True when ``env`` (its ``unwrapped``) can re-seed its future tool latencies and faults
    (``reseed_tools(seed)``): the envs a ``RolloutRequest.reseed`` applies to."""
    return callable(getattr(env.unwrapped, "reseed_tools", None))


def reseed_tools(env, seed: int) -> None:
    """Re-seed the future tool latencies and faults of ``env``'s episode in progress (its
    ``unwrapped.reseed_tools``); ``ValueError`` for an env that has no such stream."""
    if not has_tool_stream(env):
        raise ValueError(f"RolloutRequest.reseed needs an env with reseed_tools(seed); {env.unwrapped.spec.id} has none "
                         "(branch it with reseed=None: see has_tool_stream)")
    env.unwrapped.reseed_tools(seed)


__all__ = ["RolloutEngine", "has_tool_stream", "reseed_tools"]
