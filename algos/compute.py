"""Compute accounting and compute-matched budgets (claim C19).

``ComputeMeter`` counts, cumulatively over a run:
  ``rollouts``            complete trajectories generated for training (masked ones included:
                          they cost generation; ``masked_rollouts`` counts them separately;
                          trajectories dropped by dynamic sampling also count)
  ``generated_tokens``    tokens the policy sampled during training rollouts
  ``observation_tokens``  env-written tokens fed to the policy (BOS, observations, SEP, forced EOS)
  ``tool_seconds``        simulated tool time reported by the envs
  ``train_flops``         analytic FLOPs of the training side (below)
  ``wall_seconds``        measured wall time of rollout + update phases (not evaluation)
  ``updates``             optimizer updates (policy versions) done

Analytic FLOPs (Kaplan et al. 2020 approximation, attention-score term ignored at these sizes):
  forward          ~= 2 * N * tokens
  forward+backward ~= 6 * N * tokens
where ``N`` counts the parameters that take part in matrix multiplies (``count_params``:
embedding lookups excluded, the LM head counted) and ``tokens`` the non-pad tokens processed.
A separate critic adds its own ``N_critic`` terms; a value head is part of the policy's ``N``.
Generation FLOPs are not in ``train_flops`` (generation is counted by tokens).

``Budget(kind, amount)`` stops a run when the chosen counter reaches ``amount`` so GRPO with G=8
and PPO with G=1 are compared at equal cost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

BUDGET_KINDS = ("rollouts", "generated_tokens", "tool_seconds", "train_flops", "updates")


def forward_flops(n_params: int, tokens: int) -> float:
    """FLOPs of one forward pass: ``2 * N * tokens``."""
    return 2.0 * n_params * tokens


def train_step_flops(n_params: int, tokens: int) -> float:
    """FLOPs of one forward + backward pass: ``6 * N * tokens``."""
    return 6.0 * n_params * tokens


@dataclass
class ComputeMeter:
    rollouts: int = 0
    masked_rollouts: int = 0
    generated_tokens: int = 0
    observation_tokens: int = 0
    tool_seconds: float = 0.0
    train_flops: float = 0.0
    wall_seconds: float = 0.0
    updates: int = 0
    turns: int = 0

    def add_trajectories(self, trajectories) -> None:
        for tr in trajectories:
            self.rollouts += 1
            self.masked_rollouts += int(tr.masked)
            self.generated_tokens += tr.generated_tokens
            self.observation_tokens += tr.observation_tokens
            self.tool_seconds += tr.tool_seconds
            self.turns += tr.turns

    def add_forward(self, n_params: int, tokens: int) -> None:
        self.train_flops += forward_flops(n_params, tokens)

    def add_train_step(self, n_params: int, tokens: int) -> None:
        self.train_flops += train_step_flops(n_params, tokens)

    def metrics(self) -> dict[str, float]:
        """``compute/*`` counters (cumulative; used as x-axes)."""
        return {f"compute/{k}": v for k, v in asdict(self).items()}

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for k, v in state.items():
            setattr(self, k, v)

    def value(self, kind: str) -> float:
        if kind not in BUDGET_KINDS:
            raise ValueError(f"budget.kind={kind!r} unknown; allowed: {', '.join(BUDGET_KINDS)}")
        return float(getattr(self, kind))


@dataclass
class Budget:
    kind: str
    amount: float

    def __post_init__(self) -> None:
        if self.kind not in BUDGET_KINDS:
            raise ValueError(f"budget.kind={self.kind!r} unknown; allowed: {', '.join(BUDGET_KINDS)}")
        if not self.amount > 0:
            raise ValueError(f"budget.amount={self.amount} must be > 0")

    def spent(self, meter: ComputeMeter) -> float:
        return meter.value(self.kind)

    def fraction(self, meter: ComputeMeter) -> float:
        return min(self.spent(meter) / self.amount, 1.0)

    def exhausted(self, meter: ComputeMeter) -> bool:
        return self.spent(meter) >= self.amount


__all__ = ["BUDGET_KINDS", "Budget", "ComputeMeter", "forward_flops", "train_step_flops"]
