"""What a rollout of a multi-agent env records (``algos.rollout.RolloutEngine`` on a PettingZoo
``AECEnv``, e.g. PairFix): one ``PairTrajectory`` per agent per episode, one ``PairEpisode`` per
request.

Each agent's trajectory is laid out exactly like a one-agent rollout (``algos.batch``'s
``ContextBuilder`` and ``algos.recording.record_step``, the one layout code path): agent ``i``'s
context is ``first(obs_1) act_1 next(obs_2) ...`` where ``obs_k`` is ``env.observe(i)`` at its
``k``-th turn (its own last output, then the other agents' messages and shared results since).
So the trainer steps (collate, PPO's GAE layout, the loss) apply unchanged to a list of
``PairTrajectory``; the actor only ever reads its own context (decentralized execution).

For a centralized critic (``algos.ppo_ctde``), every decision point of an agent also records
the **joint state** (:func:`joint_context`): its own context up to its decision (ending with the
layout's separator after the observation) + every other agent's context so far (without its
first id: the word layout's BOS, a chat layout's first marker) + the separator ``layout.next("")``
(the word layout: [SEP]; a chat layout: the ids that open the next user turn).
``PairTrajectory.joint_points[k]`` is the joint state at turn ``k``; ``joint_bootstrap`` the one
after the final observation of a truncated end (V(next state)).

Messages: an action whose first word is ``send`` is a message; an observation line
``message from <agent> : WORDS`` delivers one (:func:`is_message`, :func:`received_messages`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from algos.batch import ContextBuilder, Trajectory


@dataclass
class PairTrajectory(Trajectory):
    """A ``Trajectory`` of one agent of a multi-agent episode (one segment: no compression)."""

    agent: str = ""
    pair_index: int = 0  # request index of the episode (every agent's trajectory shares it)
    joint_points: list[list[int]] = field(default_factory=list)  # per turn: the joint state's ids
    joint_bootstrap: list[int] | None = None  # truncated end: joint state after the final observation
    messages_sent: int = 0  # turns whose action was a message (:func:`is_message`)
    messages_received: list[str] = field(default_factory=list)  # the others' messages, in order


@dataclass(frozen=True)
class PairEpisode:
    """One multi-agent episode: ``by_agent[agent]`` is the agent's trajectory, None for an agent
    that never acted (another ended the episode first). Its keys are the env's agents, in order."""

    by_agent: dict[str, PairTrajectory | None]

    def for_agent(self, name: str) -> PairTrajectory | None:
        """The trajectory of agent ``name``; ``KeyError`` for an agent the episode does not have."""
        if name not in self.by_agent:
            raise KeyError(f"agent {name!r} unknown; allowed: {', '.join(self.by_agent)}")
        return self.by_agent[name]

    def agents(self) -> tuple[str, ...]:
        """The names of the agents that acted, in the env's order."""
        return tuple(a for a, t in self.by_agent.items() if t is not None)

    def trajectories(self) -> tuple[PairTrajectory, ...]:
        """The trajectories of the agents that acted, in the env's order."""
        return tuple(self.by_agent[a] for a in self.agents())

    @property
    def masked(self) -> bool:
        """True when a trajectory of the episode is masked (no loss, no score)."""
        return any(t.masked for t in self.trajectories())

    @property
    def tool_seconds(self) -> float:
        """The team's tool seconds: the env reports one cumulative team total, and each agent's
        trajectory keeps the total at its own last observation, so the episode's is the largest
        of those (not their sum)."""
        return max((t.tool_seconds for t in self.trajectories()), default=0.0)

    @property
    def final_info(self) -> dict:
        """The env's final info of the first agent that acted: the team's outcome (``verified``
        and the env's team keys), equal for every agent."""
        return self.trajectories()[0].final_info


def joint_context(own: ContextBuilder, others: list[ContextBuilder | None], sep: list[int],
                  own_end: int | None = None) -> list[int]:
    """The centralized critic's input: ``own``'s context (its first ``own_end`` ids; None: all of
    it), then each other agent's context so far without its first id (none before its first
    turn), then ``sep`` (see the module docstring)."""
    out = list(own.seg.tokens[:own_end])
    for b in others:
        if b is not None and b.segments:
            out.extend(b.seg.tokens[1:])
    return out + list(sep)


def is_message(action: str) -> bool:
    """True when the action text is a message to the other agents (its first word is ``send``)."""
    return action.split(" ")[0] == "send"


def received_messages(observation: str, senders: list[str]) -> list[str]:
    """The words of each ``message from <sender> : WORDS`` line of ``observation`` from one of
    ``senders``, in order."""
    heads = tuple(f"message from {a} : " for a in senders)
    return [line.split(" : ", 1)[1] for line in observation.split("\n") if line.startswith(heads)]


def agent_trajectories(episodes: list[PairEpisode], agent: str) -> list[PairTrajectory]:
    """``agent``'s trajectories of ``episodes`` (the output of ``collect``), skipping None."""
    return [t for t in (ep.for_agent(agent) for ep in episodes) if t is not None]


__all__ = ["PairEpisode", "PairTrajectory", "agent_trajectories", "is_message", "joint_context",
           "received_messages"]
