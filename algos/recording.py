"""One env step recorded into a trajectory: ``record_step`` lays out the next context (a new
segment after a compression, ``obs [SEP]`` appended, or the end of the episode with its stop
reason, score and bootstrap state), the one code path for rollouts (``algos.rollout.RolloutEngine``)
and demonstrations (``demo_to_trajectory``), plus what a finished segment says it read
(``read_env_tokens``) and the state a turn was chosen in (``state_key_of``)."""

from __future__ import annotations

from algos.backend import WORD_LAYOUT, ContextLayout
from algos.batch import ContextBuilder, Trajectory
from envs.stop import StopReason, rule_for

# Tool statuses of INJECTED tool failures (envs/tools.py fault injection), for the
# recovery-after-tool-failure metric. "error" (the agent's own bad edit, e.g. `edit 9 + -` on a
# 3-line program), "format_error" and "permission_denied" (a hack attempt) are the agent's doing,
# not the infrastructure's, and do not count.
TOOL_FAILURE_STATUSES = frozenset({"timeout", "flaky", "crash"})


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


__all__ = ["TOOL_FAILURE_STATUSES", "demo_to_trajectory", "read_env_tokens", "record_step", "state_key_of"]
