"""The metric contract: every namespaced key a run logs (``metrics.jsonl``, ``summary.json``, the
wandb runs), declared once with its unit, the module that writes it and its meaning.

Producers and readers import the constants below instead of writing the key; docs/metrics.md's
key tables are generated from :data:`METRICS` (``python -m experiments.metrics_doc``).
tests/test_metric_contract.py fails on a key-shaped string (a namespace of :data:`NAMESPACES`
followed by a name) anywhere else in ``envs/``, ``algos/`` or ``experiments/``; the end-to-end
training tests fail on a logged key that :func:`declared` does not know. A key with a data part (a
stop reason, a task family, an agent) is a *family*: one declaration with a ``<placeholder>``,
built by :func:`member` (or :func:`agent_key`, :func:`on_train_split`) and matched by
:func:`declared`. Keys a loss or estimator builds from a prefix (``train/`` + ``"clip_frac"``) are
declared here all the same. Pure data: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Where a key is written.
JSONL = "metrics.jsonl"
SUMMARY = "summary.json"
BOTH = "metrics.jsonl, summary.json"
WANDB = "wandb (the compare job's report run)"


@dataclass(frozen=True)
class Metric:
    """One declared key. ``key`` may hold ``<placeholder>`` parts (a family); a trailing
    ``<key>`` stands for any declared key (a wrapper such as ``agent_<X>/<key>``)."""

    key: str
    unit: str
    producer: str
    meaning: str
    where: str = JSONL

    @property
    def is_family(self) -> bool:
        return "<" in self.key

    def match(self, key: str) -> str | None:
        """For a family, ``key``'s wrapped inner key ("" when the family wraps none) when ``key``
        belongs to it, else None; for a plain key, "" when equal."""
        if not self.is_family:
            return "" if key == self.key else None
        parts = re.split(r"(<[A-Za-z_]+>)", self.key)
        wraps = parts[-2:] == ["<key>", ""]
        body = "".join(_PLACEHOLDER.get(p, _PART) if p.startswith("<") else re.escape(p)
                       for p in (parts[:-2] if wraps else parts))
        m = re.fullmatch(body + ("(.+)" if wraps else ""), key)
        return None if m is None else (m.group(1) if wraps else "")


#: What a placeholder matches: one path part, except a report image (``<env>/<plot>``).
_PART = "[A-Za-z0-9_.-]+"
_PLACEHOLDER = {"<image>": "[A-Za-z0-9_./-]+"}

#: Every declared key, in declaration order (the order of the docs tables).
METRICS: dict[str, Metric] = {}


def _key(key: str, unit: str, producer: str, meaning: str, where: str = JSONL) -> str:
    if key in METRICS:
        raise ValueError(f"metric key {key!r} declared twice")
    METRICS[key] = Metric(key, unit, producer, meaning, where)
    return key


def _family(key: str, unit: str, producer: str, meaning: str, where: str = JSONL) -> str:
    """Declare family ``key`` (with ``<name>`` parts); returns the template, for :func:`member`."""
    if "<" not in key:
        raise ValueError(f"family {key!r} has no <placeholder>")
    return _key(key, unit, producer, meaning, where)


def member(family: str, /, **parts: str) -> str:
    """The key of ``family`` with its placeholders filled: ``member(ROLLOUT_STOP, reason="done")
    == "rollout/stop/done"``."""
    key = family
    for name, value in parts.items():
        if f"<{name}>" not in key:
            raise ValueError(f"family {family!r} has no <{name}>; allowed: {re.findall(r'<([A-Za-z_]+)>', family)}")
        key = key.replace(f"<{name}>", str(value))
    if "<" in key:
        raise ValueError(f"family {family!r}: no value for {re.findall(r'<[A-Za-z_]+>', key)}")
    return key


def prefix(family: str) -> str:
    """The part of ``family`` before its first placeholder: ``prefix(ROLLOUT_STOP) == "rollout/stop/"``."""
    return family[: family.index("<")]


# ---------------------------------------------------------------- namespaces

COMPUTE = "compute/"
ROLLOUT = "rollout/"
TRAIN = "train/"
CRITIC = "critic/"
EVAL = "eval/"
EVAL_TRAIN = "eval_train/"
START_MODEL = "start_model/"
BUDGET = "budget/"
REPORT = "report/"
OFF_POLICY = "off_policy/"
ASYNC = "async/"
AGENT = "agent_"

#: The namespaces and what each holds (docs/metrics.md's namespace table); a key-shaped string
#: outside this module is one that starts with one of them.
NAMESPACES: dict[str, str] = {
    COMPUTE: "cumulative cost counters since the start of the run: the compute axes",
    ROLLOUT: "this update's training rollouts: success, group rates, stop reasons, hacking, turns, tokens",
    TRAIN: "the update: losses, clipping, KL, entropy, gradient norm, aggregation diagnostics, padding",
    CRITIC: "the critic's values and explained variance (methods with a critic)",
    OFF_POLICY: "how far the sampler is behind and how far its log-probs are from the trainer's on the update's loss tokens",
    ASYNC: "the waits of an asynchronous run (`rollout.mode=async`): trainer and sampler process",
    EVAL: "held-out evaluation at a fixed test-time budget, scored by the evaluation verifier",
    EVAL_TRAIN: "the `eval/` keys on training-split tasks (`eval.train_split`)",
    START_MODEL: "the start model: its checkpoint and held-out success at the same test budget",
    BUDGET: "the compute budget the run was matched on",
    REPORT: "the tables and images of the compare job's wandb report run",
    AGENT + "<X>/": "a key of another namespace for agent `X` (`a` or `b`) of a two-agent run",
}

_ONE = "algos/compute.py"
_ROLL = "experiments/runtime/one_agent.py"
_PAIR = "algos/ppo_ctde.py"
_PAIR_RT = "experiments/runtime/pair.py"
_TRAINER = "algos/trainer.py"
_PPO = "algos/ppo.py"
_EVAL = "algos/evaluation.py"
_LOOP = "experiments/runtime/loop.py"

# ---------------------------------------------------------------- compute/ (algos.compute.ComputeMeter)

COMPUTE_ROLLOUTS = _key(
    "compute/rollouts", "rollouts", _ONE,
    "complete training rollouts (episodes) generated; pair episodes in a two-agent run",
    BOTH,
)
COMPUTE_MASKED_ROLLOUTS = _key(
    "compute/masked_rollouts", "rollouts", _ONE,
    "training rollouts masked out of the loss (counted in `compute/rollouts` too)",
    BOTH,
)
COMPUTE_GENERATED_TOKENS = _key(
    "compute/generated_tokens", "tokens", _ONE,
    "policy-sampled tokens during training rollouts",
    BOTH,
)
COMPUTE_OBSERVATION_TOKENS = _key(
    "compute/observation_tokens", "tokens", _ONE,
    "environment-written tokens the policy read during training rollouts (not the final "
    "observation of a truncated episode)",
    BOTH,
)
COMPUTE_TOOL_SECONDS = _key(
    "compute/tool_seconds", "seconds", _ONE,
    "simulated tool seconds spent during training rollouts (a multi-agent episode: its team total once)",
    BOTH,
)
COMPUTE_TRAIN_FLOPS = _key(
    "compute/train_flops", "FLOPs", _ONE,
    "estimated FLOPs of all training forward/backward passes (policy and critic): forward "
    "2·params·tokens, forward + backward 6·params·tokens, plus the attention-score term 2·L·d·Σ "
    "T(T+1)",
    BOTH,
)
COMPUTE_WALL_SECONDS = _key(
    "compute/wall_seconds", "seconds", _ONE,
    "wall-clock seconds of training updates (rollout collection + update; evaluation excluded)",
    BOTH,
)
COMPUTE_UPDATES = _key("compute/updates", "updates", _ONE, "updates made", BOTH)
COMPUTE_TURNS = _key("compute/turns", "turns", _ONE, "turns (tool calls) of all training rollouts", BOTH)
COMPUTE_WARMUP_ROLLOUTS = _key(
    "compute/warmup_rollouts", "rollouts", _ONE,
    "rollouts collected while `algo.value_warmup_updates` trains only the critic (counted in "
    "every other axis too; the warm-up share is their ratio to `compute/rollouts`)",
    BOTH,
)
COMPUTE_BUDGET_FRACTION = _key(
    "compute/budget_fraction", "fraction", _LOOP,
    "the spent fraction of the run's budget (`budget.kind`, `budget.amount`)",
)

#: The compute counters (cumulative, monotone) that serve as x-axes: the wandb step metrics and the
#: axes the report interpolates success curves over.
COMPUTE_AXES: tuple[str, ...] = (
    COMPUTE_ROLLOUTS, COMPUTE_GENERATED_TOKENS, COMPUTE_OBSERVATION_TOKENS, COMPUTE_TOOL_SECONDS,
    COMPUTE_TRAIN_FLOPS, COMPUTE_WALL_SECONDS,
)

# ---------------------------------------------------------------- rollout/ (this update's training rollouts)

ROLLOUT_TRAJECTORIES = _key(
    "rollout/trajectories", "trajectories", _ROLL,
    "training trajectories collected this update (masked ones included)",
)
ROLLOUT_MASKED = _key("rollout/masked", "trajectories", _ROLL, "of them, masked out of the loss")
ROLLOUT_SUCCESS_RATE = _key(
    "rollout/success_rate", "fraction", f"{_ROLL}, {_PAIR_RT}",
    "verified success rate of this update's training rollouts (the p of P_mix; the team success "
    "in a two-agent run)",
)
ROLLOUT_TRAIN_REWARD_MEAN = _key("rollout/train_reward_mean", "reward", _ROLL, "mean training reward per unmasked trajectory")
ROLLOUT_MEAN_TURNS = _key("rollout/mean_turns", "turns", _ROLL, "mean turns (tool calls) per unmasked trajectory")
ROLLOUT_MEAN_SEGMENTS = _key(
    "rollout/mean_segments", "segments", _ROLL,
    "mean context segments per unmasked trajectory (more than 1 under compression)",
)
ROLLOUT_MEAN_GENERATED_TOKENS = _key(
    "rollout/mean_generated_tokens", "tokens", _ROLL,
    "mean policy-sampled tokens per unmasked trajectory",
)
ROLLOUT_MEAN_OBSERVATION_TOKENS = _key(
    "rollout/mean_observation_tokens", "tokens", _ROLL,
    "mean environment-written tokens per unmasked trajectory",
)
ROLLOUT_MEAN_TOOL_SECONDS = _key(
    "rollout/mean_tool_seconds", "seconds", _ROLL,
    "mean simulated tool seconds per unmasked trajectory",
)
ROLLOUT_TOOL_FAILURE_RATE = _key(
    "rollout/tool_failure_rate", "fraction", _ROLL,
    "fraction of unmasked trajectories hit by an injected tool failure",
)
ROLLOUT_HACK_RATE = _key(
    "rollout/hack_rate", "fraction", _EVAL,
    "fraction of unmasked training episodes whose training reward the verifier does not confirm "
    "(reward > 0, verified 0)",
)
ROLLOUT_HACK_ATTEMPT = _family(
    "rollout/hack_attempt/<detector>", "episodes", _EVAL,
    "training episodes in which hack detector `<detector>` fired (a symptom, not an outcome)",
)
ROLLOUT_GENERATED_TOKENS_PER_SECOND = _key(
    "rollout/generated_tokens_per_second", "tokens/s", _ROLL,
    "sampled tokens per second of rollout collection",
)
ROLLOUT_COLLECT_SECONDS = _key(
    "rollout/collect_seconds", "seconds", f"{_ROLL}, {_PAIR_RT}",
    "wall seconds of this update's rollout collection",
)
ROLLOUT_MIXED_GROUP_RATE = _key(
    "rollout/mixed_group_rate", "fraction", _ROLL,
    "fraction of groups with both a success and a failure (verified)",
)
ROLLOUT_ALL_ZERO_RATE = _key("rollout/all_zero_rate", "fraction", _ROLL, "fraction of groups where every member failed")
ROLLOUT_ALL_ONE_RATE = _key("rollout/all_one_rate", "fraction", _ROLL, "fraction of groups where every member succeeded")
ROLLOUT_REWARD_MIXED_GROUP_RATE = _key(
    "rollout/reward_mixed_group_rate", "fraction", _ROLL,
    "the mixed-group rate of the training reward (NaN when it takes more than two values)",
)
ROLLOUT_STOP = _family(
    "rollout/stop/<reason>", "trajectories", _ROLL,
    "training trajectories that ended for stop reason `<reason>` (docs/environments.md, Stop "
    "reasons)",
)
# two-agent runs (algos.ppo_ctde.pair_rollout_metrics; the per-agent ones under agent_<X>/)
ROLLOUT_EPISODES = _key("rollout/episodes", "episodes", _PAIR, "unmasked pair episodes this update (two-agent runs)")
ROLLOUT_SUCCESS = _key(
    "rollout/success", "fraction", _PAIR,
    "verifier 0/1 of the pair episodes, averaged (a team outcome; also under `agent_<X>/`)",
)
ROLLOUT_SUCCESS_BUG_IN_ONLY = _family(
    "rollout/success_bug_in_<X>_only", "fraction", _PAIR,
    "(under `agent_<X>/`) the team success on the episodes whose bug is only in X's file",
)
ROLLOUT_FILE_FIXED = _key(
    "rollout/file_fixed", "fraction", _PAIR,
    "(under `agent_<X>/`) episodes whose X file computes its reference's outputs at the end",
)
ROLLOUT_TURNS = _key("rollout/turns", "turns", _PAIR, "(under `agent_<X>/`) X's turns per episode")
ROLLOUT_MESSAGES_SENT = _key("rollout/messages_sent", "messages", _PAIR, "(under `agent_<X>/`) X's `send` actions per episode")
ROLLOUT_FORMAT_ERROR_RATE = _key(
    "rollout/format_error_rate", "fraction", _PAIR,
    "(under `agent_<X>/`) fraction of X's turns answered `format_error`",
)

# ---------------------------------------------------------------- train/ (the update)

TRAIN_POLICY_LOSS = _key("train/policy_loss", "loss", _TRAINER, "the clipped policy-gradient loss, mean over optimizer steps")
TRAIN_VALUE_LOSS = _key(
    "train/value_loss", "loss", _TRAINER,
    "the critic's value loss, mean over optimizer steps (methods with a critic)",
)
TRAIN_GRAD_NORM = _key("train/grad_norm", "norm", _TRAINER, "gradient norm before clipping, mean over optimizer steps")
TRAIN_CLIP_FRAC = _key("train/clip_frac", "fraction", _TRAINER, "fraction of action tokens whose ratio was clipped")
TRAIN_RATIO_MEAN = _key("train/ratio_mean", "ratio", _TRAINER, "mean policy ratio over action tokens")
TRAIN_APPROX_KL = _key("train/approx_kl", "nats", _TRAINER, "approximate KL(old ‖ new) over action tokens")
TRAIN_ENTROPY = _key("train/entropy", "nats", _TRAINER, "policy entropy over action tokens")
TRAIN_KL_REF = _key("train/kl_ref", "nats", _TRAINER, "KL to the reference policy over action tokens (when `algo.kl_coef` > 0)")
TRAIN_IS_WEIGHT = _key(
    "train/is_weight", "ratio", _TRAINER,
    "mean importance weight of the off-policy correction (`algo.off_policy_correction`)",
)
TRAIN_CRITIC_PASS_VALUE_LOSS = _key(
    "train/critic_pass_value_loss", "loss", _TRAINER,
    "value loss of the critic-only passes of `algo.critic_epochs`",
)
TRAIN_CRITIC_PASS_GRAD_NORM = _key(
    "train/critic_pass_grad_norm", "norm", _TRAINER,
    "gradient norm of the critic-only passes of `algo.critic_epochs`",
)
TRAIN_SKIPPED = _key("train/skipped", "0/1", _TRAINER, "1 when the update had nothing to train on (no step made)")
TRAIN_UPDATE_SECONDS = _key("train/update_seconds", "seconds", _TRAINER, "wall seconds of the update")
TRAIN_BEHAVIOR_OLD_LOGP_GAP = _key(
    "train/behavior_old_logp_gap", "nats", _TRAINER,
    "mean |log π_behavior − log π_old| over action tokens",
)
TRAIN_BEHAVIOR_OLD_LOGP_GAP_MAX = _key("train/behavior_old_logp_gap_max", "nats", _TRAINER, "its maximum over action tokens")
TRAIN_AGG_WEIGHT_SHIFT = _key(
    "train/agg_weight_shift", "fraction", _TRAINER,
    "total-variation distance between token-mean and task-mean per-task loss weights on this "
    "batch",
)
TRAIN_SIGNED_ADV_MASS = _key(
    "train/signed_adv_mass", "ratio", _TRAINER,
    "Σ w·A / Σ w·|A| over the batch's action tokens with the policy term's aggregation weights: 0 "
    "for group advantages under task-mean, negative under token-mean when failures are the longer "
    "trajectories",
)
TRAIN_TOKENS = _key("train/tokens", "tokens", _TRAINER, "valid tokens of the batch")
TRAIN_ACTION_TOKENS = _key("train/action_tokens", "tokens", _TRAINER, "action (policy-sampled) tokens of the batch")
TRAIN_ROWS = _key("train/rows", "rows", _TRAINER, "rows of the padded batch")
TRAIN_MAX_ROW_LEN = _key("train/max_row_len", "tokens", _TRAINER, "longest row of the batch")
TRAIN_PADDING_EFFICIENCY = _key(
    "train/padding_efficiency", "fraction", _TRAINER,
    "real positions / computed positions of the update's forwards",
)
TRAIN_MASKED_TRAJECTORIES = _key(
    "train/masked_trajectories", "trajectories", _TRAINER,
    "masked trajectories left out of the batch",
)
TRAIN_TRAJECTORIES = _key("train/trajectories", "trajectories", _TRAINER, "trajectories trained on")
TRAIN_ADV_ABS_MEAN = _key("train/adv_abs_mean", "advantage", "algos/group.py, algos/ppo.py", "mean |advantage|")
TRAIN_ADV_ZERO_FRAC = _key("train/adv_zero_frac", "fraction", "algos/group.py", "fraction of zero advantages (group methods)")
TRAIN_GROUPS_MIXED_RATE = _key(
    "train/groups_mixed_rate", "fraction", "algos/group.py, algos/steps.py",
    "mixed-group rate of the batch the update trains on",
)
TRAIN_DROPPED_TRAJECTORIES = _key(
    "train/dropped_trajectories", "trajectories", "algos/group.py, algos/steps.py",
    "trajectories of all-same groups dropped from the batch",
)
TRAIN_DROPPED_GROUPS = _key(
    "train/dropped_groups", "groups", "algos/group.py, algos/steps.py",
    "all-same groups dropped from the batch",
)
TRAIN_STEP_GROUPS = _key(
    "train/step_groups", "groups", "algos/gigpo.py, algos/grouped_value.py",
    "GiGPO's step groups (states visited by several members of a group)",
)
TRAIN_ANCHOR_HIT_RATE = _key(
    "train/anchor_hit_rate", "fraction", "algos/gigpo.py, algos/grouped_value.py",
    "fraction of real steps whose state is in a step group",
)
TRAIN_STATE_VALUE_EV_HELDOUT = _key(
    "train/state_value_ev_heldout", "explained variance", "algos/grouped_value.py",
    "explained variance of each step's return-to-go by the state value the other members of its "
    "group give it: the critic-free counterpart of `critic/explained_variance_heldout`",
)
TRAIN_SCORED_STEP_FRAC = _key(
    "train/scored_step_frac", "fraction", "algos/grpo_process.py",
    "fraction of real steps with a process score",
)
TRAIN_LAM_ACTOR_MEAN = _key(
    "train/lam_actor_mean", "λ", _PPO,
    "mean length-adaptive actor λ of the batch's trajectories (`algo.lam_alpha`)",
)
TRAIN_POLICY_FROZEN = _key(
    "train/policy_frozen", "0/1", f"{_PPO}, {_PAIR}",
    "1 while the critic warm-up (`algo.value_warmup_updates`) keeps the policy frozen",
)
TRAIN_LR = _key(
    "train/lr", "learning rate", f"{_ROLL}, {_PAIR_RT}",
    "the policy's learning rate this update (`algo.lr_schedule`)",
)

# ---------------------------------------------------------------- off_policy/ (algos.corrections.mismatch_metrics)

_CORR = "algos/corrections.py"
OFF_POLICY_PROB_RATIO_ERROR = _key(
    "off_policy/prob_ratio_error", "ratio", _CORR,
    "mean over loss tokens of |π_behavior / π_old − 1| (0 when sampler and trainer agree)",
)
OFF_POLICY_BEHAVIOR_KL_K1 = _key(
    "off_policy/behavior_kl_k1", "nats", _CORR,
    "mean over loss tokens of log π_behavior − log π_old: the k1 estimate of KL(π_behavior ‖ "
    "π_old) per token (can be < 0)",
)
OFF_POLICY_BAND_DROP_SHARE = _key(
    "off_policy/band_drop_share", "fraction", _CORR,
    "share of loss tokens whose ρ = π_old / π_behavior lies outside the correction's band "
    "[is_low, is_high] (the tokens `token-mask` would drop)",
)
OFF_POLICY_STALENESS_MEAN = _key(
    "off_policy/staleness_mean", "updates", _TRAINER,
    "mean over action tokens of the updates between the policy version that sampled the token and "
    "the one the update starts from (0 when `rollout.staleness=0`)",
)
OFF_POLICY_STALENESS_MAX = _key("off_policy/staleness_max", "updates", _TRAINER, "its maximum over action tokens")
ASYNC_TRAINER_WAIT_SECONDS = _key(
    "async/trainer_wait_seconds", "seconds", _ROLL,
    "seconds the trainer waited for this update's batch from the sampler process "
    "(`rollout.mode=async`)",
)
ASYNC_SAMPLER_WAIT_SECONDS = _key(
    "async/sampler_wait_seconds", "seconds", _ROLL,
    "seconds the sampler process waited for the weights of the version it sampled this batch with "
    "(`rollout.mode=async`)",
)

# ---------------------------------------------------------------- critic/ (methods with a critic)

CRITIC_VALUE_MEAN = _key("critic/value_mean", "return", _PPO, "mean critic value over action positions")
CRITIC_RETURN_MEAN = _key("critic/return_mean", "return", _PPO, "mean GAE return target over action positions")
CRITIC_EXPLAINED_VARIANCE_HELDOUT = _key(
    "critic/explained_variance_heldout", "explained variance", _PPO,
    "the critic's explained variance on complete returns of episodes it was not fitted on (values "
    "before this update's fit); absent with fewer than 2 held-out points, null when those returns "
    "all are equal",
)
CRITIC_WARMUP_EXPLAINED_VARIANCE_HELDOUT = _key(
    "critic/warmup_explained_variance_heldout", "explained variance", _PPO,
    "the pretrained critic's held-out explained variance on the first batch after the warm-up "
    "(logged once)",
)
CRITIC_HELDOUT_POINTS = _key(
    "critic/heldout_points", "points", _PPO,
    "number of (action position, complete return) pairs the held-out explained variance used",
)
CRITIC_EXPLAINED_VARIANCE_IN_BATCH = _key(
    "critic/explained_variance_in_batch", "explained variance", f"{_PPO}, {_PAIR}",
    "the fitted critic's explained variance on this batch's returns",
)

# ---------------------------------------------------------------- eval/ (algos.evaluation.evaluate; pairs: runtime/pair.py)

EVAL_SUCCESS = _key(
    "eval/success", "fraction", _EVAL,
    "verified success rate on held-out (unseen) task templates: in metrics.jsonl on evaluation "
    "updates, in summary.json for the final policy",
    BOTH,
)
EVAL_TEST_BUDGET = _key(
    "eval/test_budget", "attempts", _EVAL,
    "test-time sampling budget: attempts per task (`eval.samples_per_task`)",
    BOTH,
)
EVAL_TASKS = _key("eval/tasks", "tasks", _EVAL, "held-out task instances evaluated (`eval.tasks`)", BOTH)
EVAL_EPISODES = _key("eval/episodes", "episodes", f"{_EVAL}, {_PAIR_RT}", "evaluation episodes run (masked ones included)", BOTH)
EVAL_MASKED = _key("eval/masked", "episodes", _EVAL, "of them, masked (excluded from the rates)", BOTH)
EVAL_RECOVERY_RATE = _key(
    "eval/recovery_rate", "fraction", _EVAL,
    "among eval episodes hit by an injected tool failure (timeout/flaky/crash), the fraction that "
    "still succeeded",
    BOTH,
)
EVAL_TOOL_FAILURE_EPISODES = _key(
    "eval/tool_failure_episodes", "episodes", _EVAL,
    "eval episodes hit by an injected tool failure",
    BOTH,
)
EVAL_HACK_RATE = _key(
    "eval/hack_rate", "fraction", _EVAL,
    "fraction of eval episodes whose training reward the verifier does not confirm (reward > 0, "
    "verified 0)",
    BOTH,
)
EVAL_HACK_ATTEMPT = _family(
    "eval/hack_attempt/<detector>", "episodes", _EVAL,
    "eval episodes in which hack detector `<detector>` fired",
    BOTH,
)
EVAL_MEAN_TURNS = _key("eval/mean_turns", "turns", _EVAL, "mean number of turns (tool calls) per eval episode", BOTH)
EVAL_TRAIN_REWARD = _key("eval/train_reward", "reward", _EVAL, "mean training reward per eval episode", BOTH)
EVAL_FAMILY_SUCCESS = _family(
    "eval/family_success/<family>", "fraction", _EVAL,
    "held-out success on task family `<family>` (runs over a task mixture)",
    BOTH,
)
EVAL_FAMILY_SCORED = _family(
    "eval/family_scored/<family>", "episodes", _EVAL,
    "scored eval episodes of task family `<family>`",
    BOTH,
)
EVAL_TRANSCRIPTS = _key(
    "eval/transcripts", "table", _LOOP,
    "one success and one failure per evaluation (wandb table; also `<run>/transcripts.json`)",
    "wandb",
)
# two-agent runs (the rollout/ keys of the pair evaluation; per agent under agent_<X>/)
EVAL_SUCCESS_BUG_IN_ONLY = _family(
    "eval/success_bug_in_<X>_only", "fraction", _PAIR_RT,
    "(under `agent_<X>/`) held-out success on the episodes whose bug is only in X's file",
    BOTH,
)
EVAL_FILE_FIXED = _key(
    "eval/file_fixed", "fraction", _PAIR_RT,
    "(under `agent_<X>/`) eval episodes whose X file computes its reference's outputs at the end",
    BOTH,
)
EVAL_TURNS = _key("eval/turns", "turns", _PAIR_RT, "(under `agent_<X>/`) X's turns per eval episode", BOTH)
EVAL_MESSAGES_SENT = _key(
    "eval/messages_sent", "messages", _PAIR_RT,
    "(under `agent_<X>/`) X's `send` actions per eval episode",
    BOTH,
)
EVAL_FORMAT_ERROR_RATE = _key(
    "eval/format_error_rate", "fraction", _PAIR_RT,
    "(under `agent_<X>/`) fraction of X's eval turns answered `format_error`",
    BOTH,
)
_family(
    "eval_train/<key>", "as the eval/ key", "experiments/runtime/one_agent.py, experiments/runtime/warmstart.py",
    "the `eval/` key `eval/<key>` measured on training-split tasks (`eval.train_split`; the start "
    "model's in the warm start)",
    BOTH,
)

# ---------------------------------------------------------------- start_model/, budget/ (summary.json)

START_MODEL_PATH = _key(
    "start_model/path", "path", "experiments/runtime/warmstart.py, experiments/runtime/pair.py",
    "checkpoint both methods started from (must be the same for a fair comparison)",
    SUMMARY,
)
START_MODEL_SUCCESS = _key(
    "start_model/success", "fraction", "experiments/runtime/warmstart.py, experiments/runtime/pair.py",
    "held-out success of the start model at the same test budget",
    SUMMARY,
)
START_MODEL_TRAIN_SPLIT_SUCCESS = _key(
    "start_model/train_split_success", "fraction", "experiments/runtime/warmstart.py",
    "the start model's success on training-split tasks (`eval.train_split`)",
    SUMMARY,
)
START_MODEL_FAMILY_SUCCESS = _family(
    "start_model/family_success/<family>", "fraction", "experiments/runtime/warmstart.py",
    "the start model's held-out success on task family `<family>`",
    SUMMARY,
)
_family(
    "start_model/agent_<X>/<key>", "as the key", _PAIR_RT,
    "the start model's `agent_<X>/<key>` evaluation key (two-agent runs)",
    SUMMARY,
)
BUDGET_KIND = _key("budget/kind", "name", _LOOP, "the compute axis the run is matched on (`budget.kind`)", SUMMARY)
BUDGET_AMOUNT = _key("budget/amount", "as the axis", _LOOP, "the budget on that axis (`budget.amount`)", SUMMARY)

# ---------------------------------------------------------------- agent_<X>/ (two-agent runs)

_family(
    "agent_<X>/<key>", "as the key", f"{_PAIR}, {_PAIR_RT}",
    "key `<key>` of agent `X` (`a` or `b`): its rollout and evaluation keys, and its trainer's "
    "`train/` and `critic/` keys (absent for a frozen agent)",
    BOTH,
)

# ---------------------------------------------------------------- report/ (the compare job's wandb report run)

REPORT_FINAL_TABLE = _key(
    "report/final_table", "table", "experiments/compare/job.py",
    "the report's final table (one row per env × method)",
    WANDB,
)
REPORT_DIAGNOSTICS = _key(
    "report/diagnostics", "table", "experiments/compare/job.py",
    "the diagnostics table (group rates, loss-weight shift, critic EV)",
    WANDB,
)
REPORT_STOP_REASONS = _key(
    "report/stop_reasons", "table", "experiments/compare/job.py",
    "training episodes per stop reason per method",
    WANDB,
)
REPORT_CONCLUSION = _key(
    "report/conclusion", "table", "experiments/report/markdown.py",
    "the Conclusion: held-out success difference at each matched compute axis",
    WANDB,
)
REPORT_REFERENCES = _key(
    "report/references", "table", "experiments/report/markdown.py",
    "the scripted floor and ceiling references per env",
    WANDB,
)
REPORT_TRANSCRIPTS = _key(
    "report/transcripts", "table", "experiments/report/markdown.py",
    "the final evaluation's example transcripts per env",
    WANDB,
)
REPORT_AGENTS = _key("report/agents", "table", "experiments/report/markdown.py", "per-agent table of two-agent runs", WANDB)
REPORT_HORIZONS = _key(
    "report/horizons", "table, image", "experiments/compare/horizons.py",
    "the horizon sweep's table and plot",
    WANDB,
)
REPORT_IMAGE = _family(
    "report/<image>", "image", "experiments/compare/job.py",
    "the report's plot `<image>` (success curves per compute axis, diagnostics, stop reasons)",
    WANDB,
)


# ---------------------------------------------------------------- lookups

def agent_key(agent: str, key: str) -> str:
    """``agent_key("a", "critic/explained_variance_heldout") == "agent_a/critic/explained_variance_heldout"``."""
    return f"{AGENT}{agent}/{key}"


def on_train_split(key: str) -> str:
    """The ``eval_train/`` twin of eval key ``key``: ``on_train_split("eval/success") == "eval_train/success"``."""
    if not key.startswith(EVAL):
        raise ValueError(f"{key!r} is not an eval/ key; allowed: a key of {sorted(k for k in METRICS if k.startswith(EVAL))}")
    return EVAL_TRAIN + key[len(EVAL):]


def declared(key: str) -> Metric | None:
    """The declaration of logged key ``key`` (its family's for a family member; for a wrapper such
    as ``agent_<X>/<key>`` the wrapped key must be declared too), or None."""
    if key in METRICS and not METRICS[key].is_family:
        return METRICS[key]
    for metric in METRICS.values():
        inner = metric.match(key) if metric.is_family else None
        if inner == "" or (inner and declared(EVAL + inner if metric.key.startswith(EVAL_TRAIN) else inner)):
            return metric
    return None


#: The keys measured by the clock: they differ between any two runs of one config and seed, so a
#: comparison of two runs' numbers leaves them out (:func:`wall_clock`); every other key is a pure
#: function of the config, the seed and the CPU kind.
WALL_CLOCK: frozenset[str] = frozenset({
    COMPUTE_WALL_SECONDS, ROLLOUT_COLLECT_SECONDS, ROLLOUT_GENERATED_TOKENS_PER_SECOND, TRAIN_UPDATE_SECONDS,
    ASYNC_TRAINER_WAIT_SECONDS, ASYNC_SAMPLER_WAIT_SECONDS,
})


def wall_clock(key: str) -> bool:
    """True for a key of :data:`WALL_CLOCK`, also wrapped for an agent (``agent_a/train/update_seconds``)."""
    if key.startswith(AGENT) and "/" in key:
        key = key.split("/", 1)[1]
    return key in WALL_CLOCK


def undeclared(keys) -> list[str]:
    """The keys of ``keys`` (namespaced ones: a ``/`` in the key) that :func:`declared` does not know, sorted."""
    return sorted(k for k in set(keys) if "/" in k and declared(k) is None)


EVAL_TRAIN_SUCCESS = on_train_split(EVAL_SUCCESS)
EVAL_TRAIN_RECOVERY_RATE = on_train_split(EVAL_RECOVERY_RATE)
EVAL_TRAIN_TOOL_FAILURE_EPISODES = on_train_split(EVAL_TOOL_FAILURE_EPISODES)
