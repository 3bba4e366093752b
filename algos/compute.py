"""Compute accounting and compute-matched budgets (claim C19).

``ComputeMeter`` counts, cumulatively over a run:
  ``rollouts``            complete trajectories generated for training (masked ones included:
                          they cost generation; ``masked_rollouts`` counts them separately;
                          trajectories dropped by dynamic sampling also count)
  ``generated_tokens``    tokens the policy sampled during training rollouts
  ``observation_tokens``  env-written tokens the policy read during rollouts (BOS, observations,
                          SEP, forced EOS fed back): what was prefilled into its KV cache, NOT
                          tokens laid out in a segment but never fed (the final observation of a
                          truncated episode, kept only for the critic's bootstrap; a forced EOS
                          closing a segment's last action) — ``Trajectory.observation_tokens``
  ``tool_seconds``        simulated tool time reported by the envs
  ``train_flops``         analytic FLOPs of the training side (below)
  ``wall_seconds``        measured wall time of rollout + update phases (not evaluation)
  ``updates``             optimizer updates (policy versions) done
  ``warmup_rollouts``     the part of ``rollouts`` collected for critic warm-up updates (PPO's
                          ``algo.value_warmup_updates``: value pretraining on real rollouts, which
                          count on every other counter like any update's)

Analytic FLOPs (Kaplan et al. 2020 parameter term, plus the attention-score term counted exactly
for causal rows):
  forward          = 2 * N * tokens + A
  forward+backward = 6 * N * tokens + 3 * A        (backward = 2 x forward, both terms)
  A = 2 * n_layers * d_model * sum_r T_r (T_r + 1)
where ``N`` counts the parameters that take part in matrix multiplies (``count_params``:
embedding lookups excluded, the LM head counted), ``tokens`` the non-pad tokens processed and
``T_r`` the non-pad length of row ``r``. ``A`` is the attention scores' cost, which has no
parameters: in each layer the query at position ``t`` (0-based) meets ``t + 1`` causal keys, with
``2 * d_model * (t + 1)`` FLOPs for ``Q K^T`` and as many for the weighted sum of ``V``; summed over
``t < T`` that is ``4 * d_model * T (T + 1) / 2`` per layer. Relative to the ``2 N T`` term with
``N ~ 12 n_layers d_model^2`` it is ``(T + 1) / (12 d_model)`` (less with the LM head in ``N``): for
the tiny policy (d_model 64, 2 layers, N = 134 656 with its LM head) ``A / (2 N T)`` is 0.096 at
T = 100, 0.244 at 256 and 0.488 at 512. It grows with the context length, so FLOP-matched
comparisons between compression settings need it. Softmax, layer norms, biases and activations are left out (lower order: no ``d_model^2`` and
no ``T * d_model`` per position).
A separate critic adds its own ``N_critic`` and ``A`` terms; a value head is part of the policy's
``N``. Generation FLOPs are not in ``train_flops`` (generation is counted by tokens).

``Budget(kind, amount)`` stops a run when the chosen counter reaches ``amount`` so GRPO with G=8
and PPO with G=1 are compared at equal cost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from algos import metric_keys as mk

BUDGET_KINDS = ("rollouts", "generated_tokens", "tool_seconds", "train_flops", "updates")


def attention_flops(n_layers: int, d_model: int, row_lengths, prefix: int = 0) -> float:
    """A = 2 * n_layers * d_model * [p (p + 1) + sum_r (T_r (T_r + 1) - p (p + 1))]: the forward
    attention-score FLOPs of causal self-attention over rows of ``T_r`` real tokens
    (``row_lengths``: ints or a 1-D tensor) whose first ``p = prefix`` ids are computed once for
    all rows (a shared prefix; 0: every row computes its own). Example: 1 layer, d_model 16, rows
    of 6 and 5 tokens: 2 * 16 * (6*7 + 5*6) = 2304; with a shared prefix of 2:
    2 * 16 * (2*3 + (42 - 6) + (30 - 6)) = 2112."""
    lengths = [int(x) for x in row_lengths]
    if any(x < 0 for x in lengths):
        raise ValueError(f"row_lengths must be >= 0, got {lengths}")
    if not 0 <= prefix <= min(lengths, default=0):
        raise ValueError(f"prefix={prefix} must be in [0, shortest row {min(lengths, default=0)}]")
    once = prefix * (prefix + 1)
    return 2.0 * n_layers * d_model * float(once * (len(lengths) > 0) + sum(x * (x + 1) - once for x in lengths))


def forward_flops(n_params: int, tokens: int, attention: float = 0.0) -> float:
    """FLOPs of one forward pass: ``2 * N * tokens + A`` (``attention`` = A, see
    :func:`attention_flops`)."""
    return 2.0 * n_params * tokens + attention


def train_step_flops(n_params: int, tokens: int, attention: float = 0.0) -> float:
    """FLOPs of one forward + backward pass: ``6 * N * tokens + 3 * A``."""
    return 6.0 * n_params * tokens + 3.0 * attention


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
    warmup_rollouts: int = 0

    def add_trajectories(self, trajectories, warmup: bool = False) -> None:
        """Count collected rollouts: trajectories, or multi-agent episodes (one rollout each; tokens
        and turns summed over their agents' ``trajectories()``, tool seconds the episode's team
        total, ``PairEpisode.tool_seconds``); ``warmup``: they feed a critic warm-up update (also
        counted in ``warmup_rollouts``)."""
        for tr in trajectories:
            self.rollouts += 1
            self.warmup_rollouts += int(warmup)
            self.masked_rollouts += int(tr.masked)
            self.tool_seconds += tr.tool_seconds
            for t in (tr.trajectories() if hasattr(tr, "trajectories") else (tr,)):
                self.generated_tokens += t.generated_tokens
                self.observation_tokens += t.observation_tokens
                self.turns += t.turns

    def add_forward(self, n_params: int, tokens: int, attention: float = 0.0) -> None:
        """Count one forward pass (:func:`forward_flops`) in ``train_flops``."""
        self.train_flops += forward_flops(n_params, tokens, attention)

    def add_train_step(self, n_params: int, tokens: int, attention: float = 0.0) -> None:
        """Count one forward + backward pass (:func:`train_step_flops`) in ``train_flops``."""
        self.train_flops += train_step_flops(n_params, tokens, attention)

    def metrics(self) -> dict[str, float]:
        """``compute/*`` counters (cumulative; used as x-axes)."""
        return {mk.COMPUTE + k: v for k, v in asdict(self).items()}

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


__all__ = ["BUDGET_KINDS", "Budget", "ComputeMeter", "attention_flops", "forward_flops", "train_step_flops"]
