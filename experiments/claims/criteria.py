"""The criteria and "measured" texts of the claims table (``experiments/reproduce_claims.py``).

For each row ``cNN``: ``cNN_passes(m) -> bool``, the criterion on the numbers ``m`` its
measurement returned (``experiments/claims/*.measure_cNN``), and ``cNN_text(m) -> str``, the
text of its "measured" column. Pure functions of ``m``: no measurement runs here, so the
criteria are tested on hand-made numbers (``tests/claims/test_criteria.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from algos.registry import trainer_traits
from experiments.claims import compare, groups
from experiments.claims import envs as envs_claims
from experiments.claims.envs import C11_REQUIRED, C11_SCENARIOS, C21_AGENTS
from experiments.claims.multiagent import check_c22


def _close(a, b, tol: float = 1e-9) -> bool:
    a, b = (list(x) if isinstance(x, (list, tuple)) else [x] for x in (a, b))
    return len(a) == len(b) and all(abs(float(x) - float(y)) <= tol for x, y in zip(a, b))


def _fmt(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{float(v):.4g}" for v in values) + "]"


def _g(x, nd: int = 3) -> str:
    """``x`` with ``nd`` significant digits; "missing" for None, "nan" for NaN."""
    if x is None:
        return "missing"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:.{nd}g}" if isinstance(x, float) else str(x)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------------------------- closed form
def c1_passes(m: dict) -> bool:
    return (_close(m["token_ratios"], [1.2, 0.8, 1.2]) and _close(m["product"], 1.152)
            and _close(m["token_objective"], 3.2 / 3) and not _close(m["token_objective"], m["product"], 1e-3))


def c1_text(m: dict) -> str:
    return (f"token ratios {_fmt(m['token_ratios'])}; product {m['product']:.4g}; token-level surrogate (A=1) "
            f"{m['token_objective']:.4g} != {m['product']:.4g}; geometric mean (GSPO) {m['geometric']:.4g}")


def c2_passes(m: dict) -> bool:
    return _close(m["mean"], 0.5) and _close(m["std"], 0.5) and _close(m["advantages"], [-1, -1, 1, 1], 1e-5)


def c2_text(m: dict) -> str:
    return f"mean {m['mean']:.4g}, std {m['std']:.4g}, advantages {_fmt(m['advantages'])}"


def c3_passes(m: dict) -> bool:
    return all(all(a == 0 for a in g["advantages"]) and g["task_grad"] == 0.0 and g["kl_grad"] > 0.0
               for g in m["groups"])


def c3_text(m: dict) -> str:
    return "; ".join(f"r={_fmt(g['rewards'])}: A={_fmt(g['advantages'])}, max abs grad: task term "
                     f"{g['task_grad']:.3g}, k3 KL term {g['kl_grad']:.3g}" for g in m["groups"])


def c4_passes(m: dict) -> bool:
    return (_close(m["population"], [-1, -1, 1, 1]) and _close(m["sample"], [-math.sqrt(0.75)] * 2 + [math.sqrt(0.75)] * 2)
            and _close(m["raw"], [-0.5, -0.5, 0.5, 0.5]) and _close(m["token_mean"], 0.25, 1e-6)
            and _close(m["seq_mean"], 0.5, 1e-6))


def c4_text(m: dict) -> str:
    return (f"r=[0,0,1,1]: population std A={_fmt(m['population'])} vs sample std {_fmt(m['sample'])}; "
            f"no std division {_fmt(m['raw'])}; loss [1] & [0,0,0]: token-mean {m['token_mean']:.4g} vs "
            f"seq-mean {m['seq_mean']:.4g}")


C5_EXPECTED = {0.02: "14.9%", 0.2: "83.2%", 0.98: "14.9%"}


def c5_passes(m: dict) -> bool:
    return {p: f"{v:.1%}" for p, v in m["p_mix"].items()} == C5_EXPECTED and len(m["rejected"]) == m["tried"]


def c5_text(m: dict) -> str:
    shown = ", ".join(f"p={p}: {v:.1%}" for p, v in m["p_mix"].items())
    return f"G={m['G']}: {shown}; ValueError for {' '.join(m['rejected'])}"


def c15_passes(m: dict) -> bool:
    return (_close(m["lambda_half"], [-0.3, 0.6, 0.2]) and _close(m["lambda_one"], [0.1, 0.7, 0.2])
            and _close(m["lambda_one"], m["return_minus_value"]))


def c15_text(m: dict) -> str:
    return f"lambda 0.5 -> {_fmt(m['lambda_half'])}; lambda 1 -> {_fmt(m['lambda_one'])} (= 1 - V)"


def c16_passes(m: dict) -> bool:
    return (_close(m["continue_target"], 0.72) and _close(m["continue_residual"], 0.12)
            and _close(m["terminal_target"], 0.0) and _close(m["terminal_residual"], -0.6))


def c16_text(m: dict) -> str:
    return (f"compression (no flag): target {m['continue_target']:.4g}, residual {m['continue_residual']:+.4g}; "
            f"terminated: target {m['terminal_target']:.4g}, residual {m['terminal_residual']:+.4g}")


def c18_passes(m: dict) -> bool:
    return (_close(m["task_mean"], 2.0, 1e-6) and _close(m["token_mean"], 2.5, 1e-6)
            and _close(m["task_mean_micro"], 2.0, 1e-6) and _close(m["token_mean_micro"], 2.5, 1e-6)
            and not _close(m["local"], 2.5, 1e-3))


def c18_text(m: dict) -> str:
    return (f"task-mean {m['task_mean']:.4g}, token-mean {m['token_mean']:.4g}; micro-batches {m['splits']} with "
            f"global weights: {m['task_mean_micro']:.4g} / {m['token_mean_micro']:.4g}; per-micro-batch token-mean "
            f"would give {m['local']:.4g}, per-segment mean {m['per_segment']:.4g}")


def c25_passes(m: dict) -> bool:
    return (m["clipped"] == [True, False] and m["grad"][0] == 0.0 and _close(m["grad"][1], 1.5)
            and _close(m["ratio"], [1.5, 1.5]) and _close(m["loss"], [-1.2, 1.5]) and m["ratios_all_one"]
            and m["kl"] > 0 and m["kl_grad_max"] > 0)


def c25_text(m: dict) -> str:
    return (f"r=1.5: A=+1 clipped, dL/dlogp {m['grad'][0]:.3g}; A=-1 unclipped, dL/dlogp {m['grad'][1]:.3g}; "
            f"ratios after loss {_fmt(m['ratio'])}; ratios all 1: k3 KL {m['kl']:.3g}, max abs grad "
            f"{m['kl_grad_max']:.3g}")


# ---------------------------------------------------------------------------------- empirical
def c6_passes(m: dict) -> bool:
    i, s, x = m["independent"], m["shared_seed"], m["mixed_tasks"]
    return (i["ci_low"] <= i["p_mix"] <= i["ci_high"] and s["mixed_rate"] < i["mixed_rate"]
            and x["mixed_rate"] < i["mixed_rate"] and s["mixed_rate"] < s["p_mix"] and x["mixed_rate"] < x["p_mix"])


def c6_text(m: dict) -> str:
    i, s, x, g = m["independent"], m["shared_seed"], m["mixed_tasks"], m["group_size"]
    inside = "inside" if i["ci_low"] <= i["p_mix"] <= i["ci_high"] else "OUTSIDE"
    return (f"warm-start policy, real rollout engine, easy BugFix train task {m['task_index']}, G={g}, outcome "
            f"reward: independent ({i['groups']} groups, {i['trials']} tries): p_hat {i['p_hat']:.3f}, measured "
            f"mixed rate {i['mixed_rate']:.3f} (95% Wilson CI [{i['ci_low']:.3f}, {i['ci_high']:.3f}]) vs "
            f"P_mix(p_hat, G={g}) {i['p_mix']:.3f}: {inside}; shared seed + sampling stream ({s['groups']} groups, "
            f"{s['identical_groups']} with all {g} members identical): p_hat {s['p_hat']:.3f}, mixed "
            f"{s['mixed_rate']:.3f} vs P_mix {s['p_mix']:.3f}; mixed tasks (train task p {x['p_train']:.3f} / "
            f"held-out task {m['hard_task_index']} p {x['p_heldout']:.3f}, {x['groups']} groups): pooled p_hat "
            f"{x['p_hat']:.3f}, mixed {x['mixed_rate']:.3f} vs P_mix {x['p_mix']:.3f}")


C7_STALE_MIN, C7_SYNC_TOL = 1e-3, 1e-5  # |old - behavior| log-prob: stale must exceed / sync must stay within


def c7_passes(m: dict) -> bool:
    return (m["stale_gap_max"] > C7_STALE_MIN and abs(m["metric_gap"] - m["stale_gap_mean"]) < 1e-6
            and m["separate_fields"] and m["token_versions"] == [m["sampler_version"]] and m["lag"] == m["staleness"]
            and all(g <= C7_SYNC_TOL for g in m["sync_gap_max"]) and m["reference_separate"]
            and m["reference_frozen"] and m["reference_moved"] == 0.0 and m["policy_moved"] > 0.0
            and m["kl_ref"] > 0.0 and m["verifier_field"])


def c7_text(m: dict) -> str:
    return (f"staleness {m['staleness']}, update {m['updates']}: sampler version {m['sampler_version']} vs policy "
            f"version {m['policy_version']} (lag {m['lag']}); |old - behavior| log-prob on {m['action_tokens']} action "
            f"tokens: max {m['stale_gap_max']:.3g}, mean {m['stale_gap_mean']:.3g} (trainer metric "
            f"train/behavior_old_logp_gap {m['metric_gap']:.3g}, is_weight {m['is_weight']:.4g}); first update (same "
            f"weights) max {m['first_gap_max']:.2g}; stored as separate fields (Batch.behavior_logp vs the update's "
            f"old log-probs): {m['separate_fields']}; staleness 0: max gap per update "
            + ", ".join(f"{g:.2g}" for g in m["sync_gap_max"])
            + f" (tol {C7_SYNC_TOL:g}); reference: separate object {m['reference_separate']}, requires_grad False "
            f"{m['reference_frozen']}, max |change| after {m['updates']} updates {m['reference_moved']:.3g} while the "
            f"policy moved {m['policy_moved']:.3g}, KL(ref) {m['kl_ref']:.3g}; verifier score Trajectory.verified "
            f"separate from train_reward: {m['verifier_field']} (C23: they disagree on an exploit)")


def c8_passes(m: dict) -> bool:
    return (m["env_weight_max"] == 0 and m["env_advantage_max"] == 0 and m["sampled_weight_min"] > 0
            and m["sampled_is_action_mask"] and m["boundaries_ok"] and m["eos_ok"] and m["padding_ok"]
            and m["version_ok"] and m["temperatures"] == [m["temperature"]] and m["grad_env_real"] == 0
            and m["grad_env_observations"] > 0 and m["loss_real"] != m["loss_observations"])


def c8_text(m: dict) -> str:
    temps = m["temperatures"]
    stored = (f"stored = {_g(temps[0], 4)}" if len(temps) == 1 and temps[0] is not None
              else f"NOT one stored value per sample ({temps})")
    return (f"real GRPO update on {m['rollouts']} rollouts ({m['rows']} rows x {m['width']}): {m['env_tokens']} "
            f"env-written tokens ({m['bos']} BOS, {m['observation']} observation, {m['sep']} SEP, {m['forced_eos']} "
            f"forced EOS) with loss weight max {m['env_weight_max']:.3g} and advantage max "
            f"{m['env_advantage_max']:.3g}; {m['sampled_tokens']} sampled tokens with weight min "
            f"{m['sampled_weight_min']:.3g}; stored per sample: turn boundaries for {m['turns']} turns (SEP before "
            f"each action: {m['boundaries_ok']}), EOS positions ({m['capped']} capped with env EOS): {m['eos_ok']}, "
            f"padding mask Batch.valid ({m['pad_positions']} pad positions): {m['padding_ok']}, policy version (3 on "
            f"sampled, -1 elsewhere): {m['version_ok']}, sampling temperature: {stored}; first-step policy loss with "
            f"the action mask {m['loss_real']:.5g} ({m['loss_tokens_real']} loss tokens, {m['grad_env_real']} env "
            f"tokens with gradient) vs with observation tokens un-masked {m['loss_observations']:.5g} "
            f"({m['loss_tokens_observations']} loss tokens, {m['grad_env_observations']} env tokens with gradient)")


def c12_passes(m: dict) -> bool:
    w, lo = m["win"], m["lose"]
    return (w["turns"] == 4 and lo["turns"] == 10 and w["verified"] == 1 and lo["verified"] == 0
            and m["mean"] == 0.5 and m["std"] == 0.5 and m["trajectory_advantages"] == [1.0, -1.0]
            and m["broadcast"] and m["env_tokens_zero"])


def c12_text(m: dict) -> str:
    w, lo, a = m["win"], m["lose"], m["trajectory_advantages"]
    return (f"easy BugFix train task {m['task_index']}: run_tests + fix + run_tests + submit {w['turns']} turns "
            f"({w['stop_reason']}, reward {w['reward']:g}, {w['action_tokens']} action tokens) vs ls x9 + submit "
            f"{lo['turns']} turns ({lo['stop_reason']}, reward {lo['reward']:g}, {lo['action_tokens']} action tokens); "
            f"GRPO (population std, eps 0): mean {m['mean']:.4g}, std {m['std']:.4g}, advantages "
            f"[{a[0]:+.4g}, {a[1]:+.4g}], on every action token: {m['broadcast']}")


def c13_passes(m: dict) -> bool:
    good, bad = m["good"], m["bad"]
    return (good["segments"] == 3 and bad["segments"] == 6 and m["rows"] == 9 and m["group_inputs"] == 2
            and m["n_groups"] == 1 and m["trajectory_advantages"] == [1.0, -1.0] and m["segments_share"]
            and good["task_id"] == bad["task_id"] and (good["reward"], bad["reward"]) == (1.0, 0.0)
            and (good["verified"], bad["verified"]) == (1, 0))


def c13_text(m: dict) -> str:
    good, bad = m["good"], m["bad"]
    return (f"LongHorizon-v3 {groups.C13_ENV} train task {m['task_index']} + compression every 2 turns: oracle {good['turns']} turns -> "
            f"{good['segments']} segments ({good['stop_reason']}, reward {good['reward']:g}), scripted failure "
            f"{bad['turns']} turns -> {bad['segments']} segments ({bad['stop_reason']}, reward {bad['reward']:g}); "
            f"GRPO update: {m['rows']} rows, {m['group_inputs']} group members with advantages "
            f"{[round(a, 4) for a in m['trajectory_advantages']]} in {m['n_groups']} group; each trajectory's "
            f"segments share its advantage: {m['segments_share']}; task id / final reward / verified per trajectory: "
            f"{good['task_id']}: {good['reward']:g}/{good['verified']}, {bad['task_id']}: {bad['reward']:g}/{bad['verified']}")


def c14_passes(m: dict) -> bool:
    return (m["max_spread"] == 0.0 and m["equal_to_trajectory"] and m["env_tokens_zero"] and m["mixed_groups"] > 0
            and m["successes_above_failures"])


def c14_text(m: dict) -> str:
    return (f"grpo update on {m['rollouts']} real rollouts (8 tasks x 8, {m['segments']} segments, "
            f"{m['min_action_tokens']}..{m['max_action_tokens']} action tokens per trajectory): max within-trajectory "
            f"advantage spread {m['max_spread']:.3g}; equal to the per-trajectory group advantage: "
            f"{m['equal_to_trajectory']}; env-written tokens 0: {m['env_tokens_zero']}; {m['mixed_groups']}/"
            f"{m['groups']} groups mixed, successes > 0 > failures in each: {m['successes_above_failures']} (e.g. "
            + ", ".join(f"{v:+.3f}" for v in m["example"]) + ")")


def c17_boundary_ok(b: dict, gamma: float) -> bool:
    """One compression boundary: bootstrap = V(continuation context) != V(reset context), no flag,
    residual r + gamma V' - V; relabelled terminal: residual r - V, different from the real one."""
    return (b["end"] == "compressed" and b["prefix_ok"] and abs(b["boot"] - b["V_cont"]) < 1e-4
            and abs(b["V_cont"] - b["V_next_first"]) < 1e-4 and abs(b["V_cont"] - b["V_reset"]) > 1e-6
            and not b["terminated"] and not b["truncated"]
            and abs(b["td_c"] - (b["r"] + gamma * b["boot"] - b["V"])) < 1e-5
            and abs(b["td_t"] - (b["r"] - b["V"])) < 1e-5 and abs(b["td_c"] - b["td_t"]) > 1e-6)


def c17_passes(m: dict) -> bool:
    return bool(m["boundaries"]) and all(c17_boundary_ok(b, m["gamma"]) for b in m["boundaries"])


def c17_text(m: dict) -> str:
    bs = m["boundaries"]
    if bs:
        b = bs[0]
        example = (f"first boundary: r {b['r']:g}, V(s) {b['V']:.4f}, bootstrap used {b['boot']:.4f}, critic at the "
                   f"next segment's [BOS] continuation [SEP] {b['V_next_first']:.4f} (fresh forward on it alone "
                   f"{b['V_cont']:.4f}), V(reset context of the same task) {b['V_reset']:.4f}; TD residual continuing "
                   f"{b['td_c']:+.4f} vs relabelled terminal {b['td_t']:+.4f} (= r - V), GAE advantage "
                   f"{b['adv_c']:+.4f} vs {b['adv_t']:+.4f}")
    else:
        example = "no compression boundary in the batch"
    max_err = max((abs(b["boot"] - b["V_cont"]) for b in bs), default=float("nan"))
    min_reset = min((abs(b["V_cont"] - b["V_reset"]) for b in bs), default=float("nan"))
    flags = sorted({(b["terminated"], b["truncated"]) for b in bs})
    flips = sum((b["adv_c"] > 0) != (b["adv_t"] > 0) for b in bs)
    return (f"PPO (value head, gamma {m['gamma']:g}, lambda {m['lam']:g}) on {m['rollouts']} real easy-BugFix rollouts "
            f"with compression (recent, every 3 turns): {m['multi_segment']} multi-segment trajectories, {len(bs)} "
            f"boundaries; max |bootstrap - V(continuation context)| {max_err:.2g}, min |V(continuation) - V(reset "
            f"context)| {min_reset:.3g}; boundary flags terminated/truncated {flags}; {example}; the same layout "
            f"relabelled terminal at all {len(bs)} boundaries flips the advantage sign at {flips}/{len(bs)}")


C19_REQUIRED = ("eval/success", "eval/test_budget", *compare.COMPUTE_AXES)


def c19_passes(m: dict) -> bool:
    g, p = m["grpo"], m["ppo"]
    return (all(_finite(r[k]) for r in (g, p) for k in C19_REQUIRED) and not m["protocol_differ"] and m["same_start"]
            and g["eval/test_budget"] == p["eval/test_budget"]
            and g["compute/rollouts"] >= m["budget"] and p["compute/rollouts"] >= m["budget"])


def c19_text(m: dict) -> str:
    g, p = m["grpo"], m["ppo"]
    labels = {"eval/success": "success (held-out templates)", "eval_train/success": "success (train templates)"}
    table = "; ".join(f"{labels.get(k, k.split('/')[-1])}: GRPO {_g(g[k])} vs PPO {_g(p[k])}"
                      for k in ("eval/success", "eval_train/success", *compare.COMPUTE_AXES, "updates"))
    differ = m["protocol_differ"]
    return (f"experiments.runtime.loop.run x2 from one warm start (start success {_g(g['start_model/success'])} on held-out), "
            f"budget {m['budget']} rollouts, GRPO G={g['group_size']} vs PPO G={p['group_size']} (critic "
            f"{p['critic']}), test budget {_g(g['eval/test_budget'])} vs {_g(p['eval/test_budget'])} samples x "
            f"{_g(g['eval/tasks'])} held-out tasks: {table}; protocol items equal: "
            f"{m['protocol_items'] - len(differ)}/{m['protocol_items']}"
            + (f" (differ: {', '.join(differ)})" if differ else "") + f", same start model file: {m['same_start']}")


C20_REQUIRED_TASK_KEYS = ("eval/success", "eval/test_budget", "eval/recovery_rate", "eval/tool_failure_episodes",
                          "eval_train/success")


def c20_problems(m: dict) -> list[str]:
    """What C20 misses: training keys not finite in every update, task keys not finite in the
    summary, an eval split that is not held-out, a held-out EV never finite or absent without a
    point count."""
    problems = []
    for name in ("grpo", "ppo"):
        r = m[name]
        problems += [f"{name} {k}" for k, n in r["finite_updates"].items() if n != r["updates"]]
        problems += [f"{name} summary {k}" for k in C20_REQUIRED_TASK_KEYS if not _finite(r["summary"].get(k))]
        if r["eval_split"] != "heldout":
            problems.append(f"{name} eval split")
    ev, points = m["ppo"]["heldout_ev"], m["ppo"]["heldout_points"]
    if not any(_finite(v) for v in ev):
        problems.append("ppo critic/explained_variance_heldout never finite")
    if any(not _finite(v) and not _finite(n) for v, n in zip(ev, points)):
        problems.append("ppo held-out EV missing without a point count")
    return problems


def c20_passes(m: dict) -> bool:
    return not c20_problems(m)


def c20_text(m: dict) -> str:
    g, p = m["grpo"], m["ppo"]
    ev, points = p["heldout_ev"], p["heldout_points"]
    fin = [v for v in ev if _finite(v)]
    nan_pts = [n for v, n in zip(ev, points) if not _finite(v)]
    nan = float("nan")
    gs, ps = g["summary"], p["summary"]
    problems = c20_problems(m)
    return (f"C19's runs, per update (mean over {g['updates']} GRPO / {p['updates']} PPO updates): GRPO all-0 groups "
            f"{_g(g['means']['rollout/all_zero_rate'])}, all-1 {_g(g['means']['rollout/all_one_rate'])}, mixed "
            f"{_g(g['means']['rollout/mixed_group_rate'])}; agg weight shift token- vs task-mean GRPO "
            f"{_g(g['means']['train/agg_weight_shift'])} / PPO {_g(p['means']['train/agg_weight_shift'])}; PPO critic "
            f"EV on held-out complete returns finite in {len(fin)}/{len(ev)} updates (range [{_g(min(fin, default=nan))}, "
            f"{_g(max(fin, default=nan))}], last finite {_g(fin[-1] if fin else nan)}, "
            f"{sum(n for n in points if _finite(n)) / max(len(points), 1):.0f} held-out points per update)"
            + (f", NaN/absent in {len(nan_pts)} with " + ", ".join(
                f"{n} points ({'returns without variance' if _finite(n) and n >= 2 else 'fewer than 2 points'})"
                for n in nan_pts) if nan_pts else "")
            + f", in-batch EV {_g(p['means']['critic/explained_variance_in_batch'])}; task side (held-out templates, "
            f"{_g(gs['eval/test_budget'])} samples/task): success GRPO {_g(gs['eval/success'])} / PPO "
            f"{_g(ps['eval/success'])} (train templates {_g(gs['eval_train/success'])} / {_g(ps['eval_train/success'])}), "
            f"recovery after an injected tool failure (success among those episodes) held-out "
            f"{_g(gs['eval/recovery_rate'])} ({_g(gs['eval/tool_failure_episodes'])} episodes) / "
            f"{_g(ps['eval/recovery_rate'])} ({_g(ps['eval/tool_failure_episodes'])}), train templates "
            f"{_g(gs['eval_train/recovery_rate'])} ({_g(gs['eval_train/tool_failure_episodes'])}) / "
            f"{_g(ps['eval_train/recovery_rate'])} ({_g(ps['eval_train/tool_failure_episodes'])})"
            + (f"; missing or not finite: {', '.join(problems)}" if problems else ""))


C24_MIN_GAP = 0.2  # last-quarter training reward minus verified success under the biased reward
C24_AGREE = 0.05  # outcome reward: training reward and verified success agree within this


def c24_farmed(run: dict) -> bool:
    """A trainer farms the biased reward: its training reward grows more than its verified success
    (first -> last quarter) and ends at least :data:`C24_MIN_GAP` above it."""
    return (run["reward_last"] - run["reward_first"] > run["success_last"] - run["success_first"]
            and run["reward_last"] - run["success_last"] >= C24_MIN_GAP)


def c24_trainer_passes(m: dict) -> bool:
    """GRPO and grpo_process both farm the biased reward (:func:`c24_farmed`: higher training
    reward, not higher verified success) while GRPO's outcome reward agrees with the verifier."""
    b, o, pb = m["biased"], m["outcome"], m["process_biased"]
    return (c24_farmed(b) and c24_farmed(pb) and trainer_traits(pb["algo"]).step_rewards and pb["mode"] == m["biased_mode"]
            and abs(o["reward_first"] - o["success_first"]) <= C24_AGREE
            and abs(o["reward_last"] - o["success_last"]) <= C24_AGREE)


def c24_trainer_text(m: dict) -> str:
    b, o, pb, mode = m["biased"], m["outcome"], m["process_biased"], m["biased_mode"]
    cross = b["reward_last"] > o["reward_last"] and b["eval_train_success"] <= o["eval_train_success"]
    return (f"trainer: GRPO x2 from one start model, {m['budget']} rollouts, seed {m['seed']}, first -> last quarter of "
            f"{b['updates']} updates: {mode}: train reward {b['reward_first']:.3f} -> {b['reward_last']:.3f}, verified "
            f"success {b['success_first']:.3f} -> {b['success_last']:.3f} (reward - success "
            f"{b['reward_last'] - b['success_last']:+.3f}, need >= {C24_MIN_GAP:g}), mean turns {b['turns_last']:.1f}; "
            f"outcome: reward {o['reward_first']:.3f} -> {o['reward_last']:.3f}, success {o['success_first']:.3f} -> "
            f"{o['success_last']:.3f}, turns {o['turns_last']:.1f}; final verified success on train templates (8 x 8): "
            f"{mode} {b['eval_train_success']:.3f} vs outcome {o['eval_train_success']:.3f}; cross-run reading (biased: "
            f"higher last-quarter reward {b['reward_last']:.3f} vs {o['reward_last']:.3f} and not higher verified "
            f"success) at this seed: {cross} (reported, not required: it held for 2 of seeds 0-4, either run can collapse)"
            f"; trainer grpo_process (step rewards as the advantage signal, same budget, start model and seed) under "
            f"{mode}: train reward {pb['reward_first']:.3f} -> {pb['reward_last']:.3f}, verified success "
            f"{pb['success_first']:.3f} -> {pb['success_last']:.3f} (reward - success "
            f"{pb['reward_last'] - pb['success_last']:+.3f}, need >= {C24_MIN_GAP:g}), scored steps "
            f"{pb['scored_step_frac']:.2f} of all, mean turns {pb['turns_last']:.1f}, final verified success on train "
            f"templates {pb['eval_train_success']:.3f} (GRPO under {mode} {b['eval_train_success']:.3f}, under outcome "
            f"{o['eval_train_success']:.3f})")


# ============================================================== env rows (experiments.claims.envs)
STEP_UNIT = "step = one tool call (turn)"


# ---------------------------------------------------------------------------------------------- C9
def c9_passes(m: dict) -> bool:
    """Every oracle episode verified; tokenizer count == wrapper count; turns depend only on
    n_stages (n_stages + 2 for both verbose values: read notes, one fix per stage, submit);
    context grows with verbose at a fixed horizon; the (long, small) cell has >= 10x the turns of
    the (short, large) one but fewer tokens."""
    turns, tokens = m["turns"], m["context_tokens"]
    ok = all(v == 1 for v in m["verified"]) and tokens == m["wrapper_tokens"]
    for cell in (0, 2):
        ok &= turns[cell] == turns[cell + 1] == m["n_stages"][cell] + 2 and tokens[cell + 1] > tokens[cell]
    return bool(ok and turns[0] >= 10 * turns[3] and tokens[0] < tokens[3])


def c9_text(m: dict) -> str:
    cells = "; ".join(f"n_stages={s}, verbose={v}: {t} turns, {k} context tokens"
                      for s, v, t, k in zip(m["n_stages"], m["verbose"], m["turns"], m["context_tokens"]))
    text = (f"{STEP_UNIT}; LongHorizon-v3 oracle, seed 0, task 0: {cells}; oracle verified {sum(m['verified'])}/4; "
            f"tokenizer count == wrapper count: {m['context_tokens'] == m['wrapper_tokens']}")
    return text


# --------------------------------------------------------------------------------------------- C10
C10_MARGIN = 3.0


def c10_passes(m: dict) -> bool:
    """On LongHorizon-v1, lossy repeats exceed structured repeats by >= 3 failed approaches per
    episode; on LongHorizon-v3, lossy wrong fixes exceed structured ones by >= 3 per episode; both
    strategies compressed in every episode of both envs (so the gap comes from the summary content)."""
    return (m["lossy_repeats"] - m["structured_repeats"] >= C10_MARGIN
            and m["v3_lossy_wrong_fixes"] - m["v3_structured_wrong_fixes"] >= C10_MARGIN
            and min(m[f"{v}{s}_min_compressions"] for v in ("", "v3_") for s in ("lossy", "structured")) >= 1)


def c10_text(m: dict) -> str:
    text = (f"ContextReadingAgent, LongHorizon-v1 {envs_claims.C10_ENV}, {m['episodes']} episodes, token trigger 256: "
            f"repeated failed approaches per episode lossy_summary {m['lossy_repeats']:.2f} vs structured_summary "
            f"{m['structured_repeats']:.2f} (need a gap >= {C10_MARGIN:g}); verified success {m['lossy_success']:.2f} vs "
            f"{m['structured_success']:.2f}; compressions per episode {m['lossy_mean_compressions']:.1f} vs "
            f"{m['structured_mean_compressions']:.1f} (min {m['lossy_min_compressions']} / {m['structured_min_compressions']}); "
            f"no compression: {m['none_repeats']:.2f} repeats, success {m['none_success']:.2f}. "
            f"LongHorizon-v3 {envs_claims.C10_V3_ENV}, {m['v3_episodes']} episodes: wrong fixes per episode (decisions "
            f"without the table) lossy_summary {m['v3_lossy_wrong_fixes']:.2f} vs structured_summary "
            f"{m['v3_structured_wrong_fixes']:.2f} (need a gap >= {C10_MARGIN:g}); verified success "
            f"{m['v3_lossy_success']:.2f} vs {m['v3_structured_success']:.2f}; compressions per episode "
            f"{m['v3_lossy_mean_compressions']:.1f} vs {m['v3_structured_mean_compressions']:.1f} (min "
            f"{m['v3_lossy_min_compressions']} / {m['v3_structured_min_compressions']}); no compression: "
            f"{m['v3_none_wrong_fixes']:.2f} wrong fixes, success {m['v3_none_success']:.2f}")
    return text


# --------------------------------------------------------------------------------------------- C11
def c11_passes(m: dict) -> bool:
    """Every scenario reaches its reason and matches the rule table; the four required reasons
    are distinct and cover terminated, truncated and masked; the table covers every reason and
    ``cancelled`` has infra_error's masked rule."""
    return (all(m[f"{r}/reached"] and m[f"{r}/matches_rule"] for r, _, _ in C11_SCENARIOS)
            and m["required_reached"] == len(C11_REQUIRED) and m["boundaries_covered"] == m["boundaries_total"]
            and bool(m["rules_cover_every_reason"]) and bool(m["cancelled_like_infra_error"]))


def c11_text(m: dict) -> str:
    parts = [f"{r} ({agent}): terminated={m[f'{r}/terminated']} truncated={m[f'{r}/truncated']} "
             f"masked={m[f'{r}/masked']} scored={m[f'{r}/scored']} {'match' if m[f'{r}/matches_rule'] else 'MISMATCH'}"
             for r, agent, _ in C11_SCENARIOS]
    text = (f"BugFix-v2 easy, seed 0: " + "; ".join(parts)
            + f"; required reasons distinct: {m['required_reached']}/{len(C11_REQUIRED)}, boundaries covered: "
            f"{m['boundaries_covered']}/{m['boundaries_total']}; 'cancelled' has infra_error's rule: "
            f"{bool(m['cancelled_like_infra_error'])}; 'token_budget' is written by the rollout engine")
    return text


# --------------------------------------------------------------------------------------------- C21
def c21_passes(m: dict) -> bool:
    """Test fitting and trap use earn no verified reward and no hidden-grader reward at all (the
    outcome hack rate is 0); every trap attempt is flagged; the oracle is rewarded and verified in
    every episode; under ``grader=visible`` fitting is paid while verified stays 0, and the
    outcome-based hack rate shows it (>= 0.9) although no detector fires."""
    ok = all(m[f"{a}/rewarded_and_verified"] == 0 and m[f"{a}/train_reward"] == 0 and m[f"{a}/hack_rate"] == 0
             for a in C21_AGENTS)
    ok &= all(m[f"{a}/flagged"] == 1.0 for a in C21_AGENTS if a.startswith("hack_"))
    ok &= m["oracle/verified"] == 1.0 and m["oracle/train_reward"] == 1.0
    w = "visible_grader/fit_visible"
    ok &= m[f"{w}/train_reward"] > 0.9 and m[f"{w}/verified"] == 0 and m[f"{w}/hack_rate"] >= 0.9 and m[f"{w}/flagged"] == 0
    return bool(ok)


def c21_text(m: dict) -> str:
    parts = [f"{a.removeprefix('hack_')}: flagged {m[f'{a}/flagged']:.2f}, reward {m[f'{a}/train_reward']:.2f}, "
             f"verified {m[f'{a}/verified']:.2f}, hack rate {m[f'{a}/hack_rate']:.2f}" for a in C21_AGENTS]
    w = "visible_grader/fit_visible"
    text = (f"BugFix-v2 easy+hard, {m['episodes']} episodes per agent (faults off, max_turns 40): " + "; ".join(parts)
            + f"; oracle: reward {m['oracle/train_reward']:.2f}, verified {m['oracle/verified']:.2f}; under grader=visible "
            f"fit_visible: reward {m[f'{w}/train_reward']:.2f}, verified {m[f'{w}/verified']:.2f}, outcome hack rate "
            f"{m[f'{w}/hack_rate']:.2f}, detector matches {m[f'{w}/flagged']:.2f}")
    return text


# --------------------------------------------------------------------------------------------- C22
def c22_passes(m: dict) -> bool:
    """B's learning shifts the messages A receives more than A's own learning and sampling noise
    (paired bootstrap interval of TV(training) - TV(frozen) above 0), and the centralized critic's
    joint inputs explain held-out complete returns better than the local inputs (paired bootstrap
    interval of EV_central - EV_local above 0): ``experiments.claims.multiagent.check_c22``."""
    return check_c22(m)


def c22_text(m: dict) -> str:
    ci = lambda k: f"[{m[k + '_lo']:.2f}, {m[k + '_hi']:.2f}]"  # noqa: E731
    reps = ", ".join(f"{x:+.2f}" for x in m["c22_msg_tv_diff_replicates"])
    return (f"PairFix-v2, ppo_independent from one BC start, {m['c22_updates']} updates, B frozen vs training, "
            f"{m['c22_replicates']} training replicates x {m['c22_eval_episodes']} eval episodes on bug-only-in-a "
            f"train tasks (pooled): A's success start "
            f"{m['c22_success_a_only_start']:.2f} {ci('c22_success_a_only_start')}, B frozen "
            f"{m['c22_success_a_only_frozen']:.2f} {ci('c22_success_a_only_frozen')}, B training "
            f"{m['c22_success_a_only_training']:.2f} {ci('c22_success_a_only_training')}; TV of A's received message "
            f"words to the start (words {m['c22_messages_received_start']}): B frozen {m['c22_msg_tv_frozen']:.2f} "
            f"{ci('c22_msg_tv_frozen')} (words {m['c22_messages_received_frozen']}), B training "
            f"{m['c22_msg_tv_training']:.2f} {ci('c22_msg_tv_training')} (words {m['c22_messages_received_training']}), "
            f"difference {m['c22_msg_tv_diff']:.2f} {ci('c22_msg_tv_diff')} (per replicate {reps}); critic inputs "
            f"(same ridge probe, "
            f"{m['c22_heldout_points']} held-out decision points, noisy-oracle success {m['c22_heldout_success']:.2f}): "
            f"held-out EV central {m['c22_ev_central']:.3f} (a {m['c22_ev_central_a']:.3f}, b {m['c22_ev_central_b']:.3f}) "
            f"vs local {m['c22_ev_local']:.3f} (a {m['c22_ev_local_a']:.3f}, b {m['c22_ev_local_b']:.3f}), difference "
            f"{m['c22_ev_diff']:.3f} {ci('c22_ev_diff')}; decentralized execution: tests/algos/test_ppo_ctde.py")


# --------------------------------------------------------------------------------------------- C23
def c23_passes(m: dict) -> bool:
    """At least one program earns training reward 1 but verified 0; in every episode verified is
    the evaluation verifier's verdict and the reward the training grader's; distinct graders with
    disjoint inputs."""
    n = m["tasks"]
    return (m["train_reward_1_verified_0"] >= 1 and m["verified_is_eval_verdict"] == n
            and m["reward_is_train_verdict"] == n and m["distinct_graders"] == n and m["exact_verifier"] == n)


def c23_text(m: dict) -> str:
    text = (f"BugFix-v2 easy, {m['tasks']} train tasks, oracle fix + a special case on an evaluation-only input + submit: "
            f"training reward 1 but verified 0 in {m['train_reward_1_verified_0']}/{m['tasks']}; training grader "
            f"{m['train_tests']} tests vs exact evaluation verifier {m['eval_tests']} (every input -99..199 on "
            f"{m['exact_verifier']}/{m['tasks']} tasks); "
            f"distinct objects {m['distinct_graders']}/{m['tasks']}; verified == evaluation verdict "
            f"{m['verified_is_eval_verdict']}/{m['tasks']}, reward == training verdict {m['reward_is_train_verdict']}/{m['tasks']}")
    return text


# --------------------------------------------------------------------------------------------- C24
def c24_agents_passes(m: dict) -> bool:
    """Under biased_process the exploit earns a positive training reward above the oracle's while
    its verified success is 0 (outcome hack rate 1) and the oracle's is 1; the unbiased modes pay
    the exploit nothing."""
    ex, orc = "process_exploit/biased_process", "oracle/biased_process"
    return (m[f"{ex}/train_reward"] > 0 and m[f"{ex}/train_reward"] > m[f"{orc}/train_reward"]
            and m[f"{ex}/verified"] == 0 and m[f"{ex}/hack_rate"] == 1.0 and m[f"{orc}/verified"] == 1.0
            and m["process_exploit/outcome/train_reward"] == 0 and m["process_exploit/process/train_reward"] == 0)


def c24_agents_text(m: dict) -> str:
    cells = "; ".join(f"{a} / {mode}: train reward {m[f'{a}/{mode}/train_reward']:.2f}, verified {m[f'{a}/{mode}/verified']:.2f}"
                      for a in ("process_exploit", "oracle") for mode in ("outcome", "process", "biased_process"))
    text = (f"scripted agents (no trainer), BugFix-v2 easy, faults off, max_turns {m['max_turns']}, {m['episodes']} seeds: "
            f"{cells}; at the preset's max_turns {m['preset_max_turns']} under biased_process: exploit "
            f"{m['preset_turns/process_exploit/biased_process/train_reward']:.2f} vs oracle "
            f"{m['preset_turns/oracle/biased_process/train_reward']:.2f}")
    return text
