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

import torch

import envs
from algos.backend import WORD_LAYOUT, ContextLayout, PolicyBackend, as_backend
from algos.batch import ContextBuilder, Trajectory
from algos.policy import PolicyModel, sample_categorical
from envs.bugfix import is_hack
from envs.stop import StopReason, rule_for

# Tool statuses of INJECTED tool failures (envs/tools.py fault injection), for the
# recovery-after-tool-failure metric. "error" (the agent's own bad edit, e.g. `edit 9 + -` on a
# 3-line program), "format_error" and "permission_denied" (a hack attempt) are the agent's doing,
# not the infrastructure's, and do not count.
TOOL_FAILURE_STATUSES = frozenset({"timeout", "flaky", "crash"})


@dataclass
class RolloutRequest:
    """One trajectory to generate: reset ``options`` (task instance) and ``seed``; ``group_id``
    ties the G members of a GRPO group (same options, different seeds).

    Branching an episode (``experiments.value_ceiling``): ``forced`` token ids are fed as the
    episode's first generated tokens instead of sampling (the sampled tokens of an earlier
    trajectory with the same ``options`` and ``seed``, so the env replays it exactly), then
    sampling continues; ``reseed`` (None: keep the stream) re-seeds the env's future tool
    latencies and faults (``reseed_tools``) just before the first token that is sampled, so
    branches of one state differ in the env's randomness as well as in the policy's. On an env
    without a tool stream (``has_tool_stream`` False) ``reseed`` must be None: its branches differ
    in the policy's samples only (every slot draws its own uniforms from ``collect``'s generator
    once its forced tokens are used up). Forced tokens are recorded like sampled ones (a branch is
    for measurement, never for training)."""

    options: dict | None
    seed: int
    group_id: int = 0
    forced: tuple[int, ...] = ()
    reseed: int | None = None


@dataclass
class _Slot:
    request_index: int
    traj: Trajectory
    builder: ContextBuilder
    pending: list[int] = field(default_factory=list)
    action_len: int = 0
    last_info: dict = field(default_factory=dict)
    forced: deque = field(default_factory=deque)  # tokens still to feed instead of sampling
    reseed: int | None = None  # applied before the first sampled token, then None


@dataclass
class _Collection:
    """The state of one ``RolloutEngine.collect`` call: the requests still queued, one slot per env
    (None: idle), the trajectories finished so far (request order), the backend's sampling cache
    (one row per slot) and the time spent in model forwards and env calls."""

    backend: PolicyBackend
    layout: ContextLayout
    requests: list[RolloutRequest]
    policy_version: int
    generator: torch.Generator | None
    temperature: float
    trace: list | None
    queue: deque
    out: list[Trajectory | None]
    slots: list[_Slot | None]
    cache: object
    t_model: float = 0.0
    t_env: float = 0.0
    n_forwards: int = 0
    n_prefill: int = 0


class RolloutEngine:
    """``collect(model, requests, policy_version, generator) -> list[Trajectory]`` (request order)."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        max_len: int,
        max_action_tokens: int = 16,
        temperature: float = 1.0,
        env_kwargs: dict | None = None,
        compression: dict | None = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"rollout.num_envs={num_envs} must be >= 1")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.compression = dict(compression) if compression else None
        self.envs = [envs.make(env_id, compression=self.compression, **self.env_kwargs) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.max_len = max_len
        self.max_action_tokens = max_action_tokens
        self.temperature = temperature
        # timing of the last collect (seconds): model forwards vs env steps vs the rest
        self.timing: dict[str, float] = {}

    def close(self) -> None:
        for env in self.envs:
            env.close()

    # -----------------------------------------------------------------------------------------
    def collect(
        self,
        model: PolicyModel | PolicyBackend,
        requests: list[RolloutRequest],
        policy_version: int = 0,
        generator: torch.Generator | None = None,
        temperature: float | None = None,
        trace: list | None = None,
    ) -> list[Trajectory]:
        """Generate one trajectory per request (returned in request order). ``trace``: when a
        list, every forward's inputs are appended to it (for the benchmark's raw replay). ``model``:
        a ``PolicyModel`` or a policy backend (``algos.backend.as_backend``). The module runs in
        eval mode under ``torch.no_grad`` and is put back in training mode if it was in it."""
        backend = as_backend(model)
        module = backend.module
        was_training = module.training
        module.eval()
        t_start = time.perf_counter()
        run = _Collection(backend=backend, layout=backend.layout, requests=requests,
                          policy_version=policy_version, generator=generator,
                          temperature=self.temperature if temperature is None else temperature, trace=trace,
                          queue=deque(range(len(requests))), out=[None] * len(requests),
                          slots=[None] * self.num_envs, cache=backend.new_cache(self.num_envs))
        for b in range(self.num_envs):
            self._refill(run, b)
        with torch.no_grad():
            while any(s is not None for s in run.slots):
                self._engine_step(run)
        if was_training:
            module.train()
        self.timing = {"total": time.perf_counter() - t_start, "model": run.t_model, "env": run.t_env,
                       "forwards": run.n_forwards, "prefill_forwards": run.n_prefill}
        return run.out  # type: ignore[return-value]

    def _refill(self, run: _Collection, b: int) -> None:
        """Empty slot ``b``; when a request is queued, reset env ``b`` for it, open the
        trajectory's first segment (``layout.first(obs)``) and empty cache row ``b``."""
        run.slots[b] = None
        if not run.queue:
            return
        i = run.queue.popleft()
        req = run.requests[i]
        t0 = time.perf_counter()
        obs, info = self.envs[b].reset(seed=req.seed, options=req.options)
        run.t_env += time.perf_counter() - t0
        traj = Trajectory(task_id=str(info.get("task_id", "")), group_id=req.group_id, index=i, seed=req.seed,
                          options=req.options, policy_version=run.policy_version, temperature=run.temperature)
        builder = ContextBuilder(self.max_len)
        first = run.layout.first(obs, self.max_len - (self.max_action_tokens + 2))[0]
        ids = builder.open_segment(first, "reset")
        run.cache.reset_rows([b])
        if run.trace is not None:
            run.trace.append(("reset", b, None, None))
        run.slots[b] = _Slot(i, traj, builder, pending=ids, last_info=info, forced=deque(req.forced),
                             reseed=req.reseed)

    def _engine_step(self, run: _Collection) -> None:
        """One engine step: one ``step_last`` over all slots, one sampled token per busy slot
        (``_sample``), then each busy slot takes its token in slot order (``_take_token``)."""
        t0 = time.perf_counter()
        inp, n_new = _pack_pending(run.slots)
        if inp.shape[1] > 1:
            run.n_prefill += 1
        logits = run.backend.step_last(run.cache, inp, n_new)
        if run.trace is not None:
            run.trace.append(("decode", inp, n_new, None))
        sampled, logps, lp_all = self._sample(logits, run.temperature, run.generator)
        run.t_model += time.perf_counter() - t0
        run.n_forwards += 1
        for b, s in enumerate(run.slots):
            if s is not None:
                self._take_token(run, b, s, sampled[b], logps[b], lp_all)

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
            logps = torch.zeros(self.num_envs)
        return sampled.tolist(), logps.tolist(), lp_all

    def _take_token(self, run: _Collection, b: int, s: _Slot, token: int, logp: float,
                    lp_all: torch.Tensor | None) -> None:
        """Record slot ``b``'s next token: its next forced token (log-prob from ``lp_all``) or else
        the sampled ``token`` (re-seeding the env's tools first when the slot holds a ``reseed``).
        An end id or the ``max_action_tokens``-th token closes the action (``_finish_action``); a
        finished trajectory goes to ``run.out`` and the slot is refilled."""
        if s.forced:
            token = s.forced.popleft()
            logp = float(lp_all[b, token]) if run.temperature > 0 else 0.0
        elif s.reseed is not None:
            reseed_tools(self.envs[b], s.reseed)
            s.reseed = None
        s.builder.add_sampled(token, logp, run.policy_version)
        s.traj.generated_tokens += 1
        s.action_len += 1
        is_eos = token in run.layout.end_ids
        if not is_eos and s.action_len < self.max_action_tokens:
            s.pending = [token]
            return
        t0 = time.perf_counter()
        done = self._finish_action(run, b, s, capped=not is_eos)
        run.t_env += time.perf_counter() - t0
        if done:
            run.out[s.request_index] = s.traj
            self._refill(run, b)

    # -----------------------------------------------------------------------------------------
    def _finish_action(self, run: _Collection, b: int, s: _Slot, capped: bool) -> bool:
        """Close the action, step the env, lay out what the policy sees next. True when done."""
        builder = s.builder
        layout = run.layout
        close = layout.capped_close
        turn = builder.end_action(capped, close)
        turn.state_key = state_key_of(s.last_info)  # the state the action was chosen in
        seg = builder.seg
        sampled = seg.tokens[turn.start: turn.end + 1]
        # the tokens not yet fed to the model: the last sampled one (+ the closing ids when capped)
        last_fed = seg.tokens[-(1 + len(close) if capped else 1):]
        obs, reward, terminated, truncated, info = self.envs[b].step(layout.action_text(sampled, capped))
        s.action_len = 0
        s.last_info = info
        kind, ids = record_step(builder, s.traj, turn, obs, reward, terminated, truncated, info,
                                self.max_action_tokens, layout)
        if kind == "done":
            return True
        if kind == "compressed":
            run.cache.reset_rows([b])
            if run.trace is not None:
                run.trace.append(("reset", b, None, None))
            s.pending = ids
        else:
            s.pending = last_fed + ids
        return False


def _pack_pending(slots: list[_Slot | None]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inp [num_envs, width], n_new [num_envs])``: every busy slot's pending tokens (one sampled
    token, or an observation / a new segment's context), right-padded with 0 to the longest;
    an empty slot feeds nothing (``n_new`` 0; one pad 0 when ``width`` is 1)."""
    lens = [len(s.pending) if s is not None else 0 for s in slots]
    width = max(lens)
    if width == 1:
        inp = torch.tensor([[s.pending[0] if s is not None else 0] for s in slots], dtype=torch.long)
    else:
        inp = torch.tensor([(s.pending if s is not None else []) + [0] * (width - n)
                            for s, n in zip(slots, lens)], dtype=torch.long)
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


def state_key_of(info: dict) -> int:
    """``int(info["state_key"])`` (the env's 64-bit hash of the state the next tool outputs depend
    on), or -1 when the env gives none."""
    key = info.get("state_key")
    return -1 if key is None else int(key)


def record_step(builder: ContextBuilder, traj: Trajectory, turn, obs: str, reward: float, terminated: bool,
                truncated: bool, info: dict, max_action_tokens: int,
                layout: ContextLayout = WORD_LAYOUT) -> tuple[str, list[int]]:
    """Record one env step's result after the action ``turn`` was closed; lay out the next context.

    Returns ``(kind, ids)``: ``kind`` is ``"done"`` (episode ended; trajectory finalised),
    ``"compressed"`` (a new segment ``[BOS] obs [SEP]`` was opened: ``ids`` is all of it) or
    ``"continue"`` (``ids`` = ``obs [SEP]`` appended); the ids are ``layout``'s (``first`` /
    ``next``; default the word layout). The one code path for laying out contexts: the rollout
    engine and the warm start's demonstrations both go through it."""
    seg = builder.seg
    turn.reward = float(reward)
    turn.tool_status = str(info.get("tool_status", "ok"))
    traj.turns += 1
    traj.train_reward += float(reward)
    if turn.tool_status in TOOL_FAILURE_STATUSES:
        traj.tool_failures += 1
    traj.tool_seconds = float(info.get("tool_seconds", traj.tool_seconds))
    if terminated or truncated:
        _end(traj, builder, info, terminated, truncated, obs, layout)
        return "done", []
    room = max_action_tokens + 2  # the next action (cap words + EOS) and a final [SEP]
    if info.get("compression") is not None:
        seg.end = "compressed"
        seg.compression = dict(info["compression"])
        ids, kept = layout.first(obs, builder.max_len - room)
        seg.continuation = list(kept)
        return "compressed", builder.open_segment(ids, "compression")
    nxt = layout.next(obs)
    if len(seg.tokens) + len(nxt) + room > builder.max_len:
        # the context is full: an outside limit cuts the episode (token budget)
        info = dict(info)
        info.update(stop_reason=StopReason.TOKEN_BUDGET.value, masked=False, verified=0, engine_truncated=True)
        _end(traj, builder, info, False, True, obs, layout)
        return "done", []
    return "continue", builder.add_env(nxt)


def _end(traj: Trajectory, builder: ContextBuilder, info: dict, terminated: bool, truncated: bool,
         obs: str, layout: ContextLayout) -> None:
    seg = builder.seg
    reason = info.get("stop_reason")
    rule = rule_for(reason) if reason is not None else None
    masked = bool(info.get("masked", rule.masked if rule else False))
    traj.stop_reason = str(reason) if reason is not None else ("terminated" if terminated else "truncated")
    traj.masked = masked
    traj.terminated = bool(terminated) and not masked
    traj.truncated = not traj.terminated
    traj.verified = None if masked else int(info.get("verified") or 0)
    traj.visible_pass_rate = info.get("visible_pass_rate")
    traj.hack_flags = dict(info.get("hack_flags") or {})
    traj.final_info = {k: v for k, v in info.items() if isinstance(v, (int, float, str, bool, type(None)))}
    if masked:
        seg.end = "masked"
    elif traj.terminated:
        seg.end = "terminated"
    else:
        seg.end = "truncated"
        # the next state the episode was cut in: obs appended, V read at its final SEP
        builder.add_env(layout.next(obs, builder.max_len - len(seg.tokens)))
        seg.bootstrap_index = len(seg.tokens) - 1
    traj.segments = builder.segments
    traj.observation_tokens = sum(read_env_tokens(x) for x in traj.segments)


def read_env_tokens(seg) -> int:
    """Env-written tokens of a finished segment that the policy READ during the rollout: those
    before the last sampled token of its last action. That token and everything after it (a
    forced EOS closing a capped action, and for a truncated end the final observation + [SEP]
    laid out only for the critic's V(next state)) were never fed: the episode ended or a new
    segment began. A segment without actions counts all its env-written tokens."""
    if not seg.turns:
        return len(seg.tokens) - seg.n_sampled
    last = seg.turns[-1].end
    return last - sum(seg.action_mask[:last])


def demo_to_trajectory(observations: list[str], actions: list[str], rewards: list[float], infos: list[dict],
                       terminated: bool, truncated: bool, max_len: int, max_action_tokens: int,
                       group_id: int = 0, layout: ContextLayout = WORD_LAYOUT) -> Trajectory:
    """A scripted episode laid out exactly like a rollout (``record_step``) in ``layout``: the
    demo's action ids (``layout.action_ids``: the words and their EOS in the word layout) are the
    "sampled" tokens, with behavior log-prob 0 and policy version -1. Raises ``ValueError`` when an
    action has more than ``max_action_tokens`` ids before its end id."""
    traj = Trajectory(task_id=str(infos[0].get("task_id", "")), group_id=group_id, policy_version=-1)
    builder = ContextBuilder(max_len)
    builder.open_segment(layout.first(observations[0], max_len - (max_action_tokens + 2))[0], "reset")
    for t, action in enumerate(actions):
        ids = layout.action_ids(action)
        if len(ids) - 1 > max_action_tokens:
            raise ValueError(f"demo action {action!r} has {len(ids) - 1} tokens > rollout.max_action_tokens={max_action_tokens}")
        for w in ids:
            builder.add_sampled(w, 0.0, -1)
        traj.generated_tokens += len(ids)
        turn = builder.end_action(capped=False)
        turn.state_key = state_key_of(infos[t])
        last = t == len(actions) - 1
        kind, _ = record_step(builder, traj, turn, observations[t + 1], rewards[t],
                              terminated and last, truncated and last, infos[t + 1], max_action_tokens, layout)
        if kind == "done":
            break
    return traj


def hack_metrics(trajectories: list[Trajectory], prefix: str) -> dict:
    """Reward hacking measured by outcome, over the unmasked trajectories:

        {prefix}hack_rate = #{train_reward > 0 and verified == 0} / #unmasked   (``envs.bugfix.is_hack``)

    i.e. training reward the independent verifier does not confirm, whatever the syntax; and, as
    diagnostics, ``{prefix}hack_attempt/<detector>`` = the number of episodes in which that
    detector of ``info["hack_flags"]`` fired (a match is a symptom, not an outcome)."""
    live = [t for t in trajectories if not t.masked]
    out = {f"{prefix}hack_rate": sum(is_hack(t.train_reward, t.verified) for t in live) / max(len(live), 1)}
    for t in live:
        for name, fired in sorted(t.hack_flags.items()):
            key = f"{prefix}hack_attempt/{name}"
            out[key] = out.get(key, 0) + int(bool(fired))
    return out


def evaluate(engine: "RolloutEngine", model: PolicyModel, n_tasks: int, samples_per_task: int,
             temperature: float, seed: int, split: str = "heldout", prefix: str = "eval/",
             return_trajectories: bool = False):
    """Success at a fixed test-time sampling budget (``samples_per_task`` attempts on each of
    ``n_tasks`` tasks of ``split``), scored by the env's independent verifier (masked episodes are
    excluded and counted). Also: recovery rate (success among episodes that hit a tool failure),
    outcome-based hack rate and detector counts (``hack_metrics``), mean turns. With
    ``return_trajectories`` returns ``(metrics, trajectories)``."""
    reqs = make_requests(n_tasks, samples_per_task, seed=seed, split=split, task_indices=list(range(n_tasks)))
    gen = torch.Generator().manual_seed(seed)
    trajs = engine.collect(model, reqs, policy_version=-1, generator=gen, temperature=temperature)
    live = [t for t in trajs if not t.masked]
    n = max(len(live), 1)
    failed = [t for t in live if t.tool_failures > 0]
    metrics = {
        f"{prefix}success": sum(int(t.verified or 0) for t in live) / n,
        f"{prefix}test_budget": samples_per_task,
        f"{prefix}tasks": n_tasks,
        f"{prefix}episodes": len(trajs),
        f"{prefix}masked": len(trajs) - len(live),
        f"{prefix}recovery_rate": (sum(int(t.verified or 0) for t in failed) / len(failed)) if failed else float("nan"),
        f"{prefix}tool_failure_episodes": len(failed),
        **hack_metrics(trajs, prefix),
        f"{prefix}mean_turns": sum(t.turns for t in live) / n,
        f"{prefix}train_reward": sum(t.train_reward for t in live) / n,
        **family_success(live, prefix),
    }
    return (metrics, trajs) if return_trajectories else metrics


def family_success(live: list, prefix: str) -> dict[str, float]:
    """``{prefix}family_success/<family>``: success among the scored episodes of each task family
    (the env's end-of-episode ``info["family"]``) and ``{prefix}family_scored/<family>`` their
    number, when the episodes span more than one family."""
    by_family: dict[str, list[int]] = {}
    for t in live:
        family = t.final_info.get("family")
        if family is not None:
            by_family.setdefault(str(family), []).append(int(t.verified or 0))
    if len(by_family) < 2:
        return {}
    out: dict[str, float] = {}
    for name, v in sorted(by_family.items()):
        out[f"{prefix}family_success/{name}"] = sum(v) / len(v)
        out[f"{prefix}family_scored/{name}"] = len(v)
    return out


def make_requests(
    n_tasks: int,
    group_size: int,
    seed: int,
    split: str = "train",
    task_indices: list[int] | None = None,
    n_task_pool: int | None = None,
    rng: torch.Generator | None = None,
) -> list[RolloutRequest]:
    """``n_tasks`` task instances x ``group_size`` rollouts each. Task indices are given, or drawn
    from ``range(n_task_pool)`` with ``rng``; member ``g`` of group ``k`` gets seed
    ``seed * 1_000_003 + k * 1_009 + g`` (different seeds, same options)."""
    if task_indices is None:
        if n_task_pool is None:
            raise ValueError("make_requests needs task_indices or n_task_pool")
        task_indices = torch.randint(n_task_pool, (n_tasks,), generator=rng).tolist()
    reqs = []
    for k, ti in enumerate(task_indices):
        for g in range(group_size):
            reqs.append(RolloutRequest(options={"task_index": int(ti), "split": split},
                                       seed=(seed * 1_000_003 + k * 1_009 + g) % (2**31 - 1), group_id=k))
    return reqs


__all__ = ["RolloutEngine", "RolloutRequest", "TOOL_FAILURE_STATUSES", "demo_to_trajectory", "evaluate",
           "has_tool_stream", "make_requests", "read_env_tokens", "record_step", "reseed_tools",
           "state_key_of"]
