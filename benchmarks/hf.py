"""The body of ``python -m benchmarks hf``: the Hugging Face policy's speed, measured side by
side with the same model, prompts and lengths (median of ``--repeats``; ratios > 1: ours is faster).

1. **Single turn**: sampling ``--new`` tokens for ``--rows`` BugFix task statements (the chat
   template's first turn) through the backend's batched cache (``HFPolicy.step_last``), next to
   ``model.generate`` on the same left-padded batch (``min_new_tokens = max_new_tokens``, so both
   sample exactly ``--new`` tokens per row). Target >= 1x.
2. **Ten turns**: each row plays ``--turns`` turns of a LongHorizon-v3 oracle episode's
   observations, sampling ``--action`` tokens per turn. The backend appends each observation's
   template suffix to the cache (token in, token out); the baseline re-renders the conversation
   with the chat template and re-encodes the whole context every turn, then ``generate``s the
   action from scratch (no cache across turns). Target >= 2x.
3. **GRPO update**: one ``trainer.update`` of the harness's GRPO on a batch of BugFix rollouts,
   in processed tokens/s, next to TRL's ``GRPOTrainer`` loss + backward + optimizer step on the
   same ids (prompt = the first turn, completion = the rest with TRL's ``tool_mask`` = the action
   mask), same model, one optimizer step each (the baseline is skipped when TRL is not installed).
   The rollouts come from the harness's ``RolloutEngine`` on BugFix with the action budget the
   training path derives for this model's tokenizer (``rollout.max_action_tokens`` null: the
   longest warm-start demo action in the tokenizer plus a margin, ``check_action_tokens``); the
   ``rollout`` row is that collection's rate (observation + generated ids per second).
4. **Shared prefix**: ``shared_rollout``: the same collection on the main job's reading tasks with
   the env's instructions as the system message (as ``policy=smollm2``), with shared-prefix
   sampling (``HFPolicy.share_prefix``: the ids fresh rows share at their start computed once)
   next to every row prefilling its whole prompt, in (observation + generated) ids per second;
   ``shared_update``: one GRPO update (LoRA r=8, ``policy=smollm2``'s ``micro_batch_tokens``) on
   those rollouts with the shared-prefix training forward next to the unshared one. Targets >= 2x.
5. **Projection**: the main job's wall time on this model and CPU, computed (arithmetic, not a
   measurement) from the measured ``rollout`` and ``grpo_update`` rates: per run, the main job's
   rollout budget (``budget.amount`` of the default compare preset) times ``--gen-per-rollout`` +
   ``--obs-per-rollout`` ids, at each rate; times the runs (methods x seeds of the preset's sweep)
   over the parallel jobs (its launcher's ``n_jobs``) (:func:`project_main_job`).

The model is a tiny one built offline (``experiments.runtime.hf_tiny``) unless ``--model DIR_OR_HUB_ID``;
``--device cuda`` runs the same on a GPU (and prints peak memory).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

import envs
from algos.hf_backend import HFPolicy, load_policy
from algos.registry import make_trainer
from algos.requests import make_requests
from algos.rollout import RolloutEngine
from envs.episode import run_episode
from envs.long_horizon_v3_agents import make_agent as make_lh3_agent
from experiments.runtime.hf_tiny import TinyModelSpec, build_tiny_model_dir
from experiments.runtime.schema import GrpoConfig

TARGETS = {"single_turn": 1.0, "ten_turns": 2.0}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default="", help="a local model directory or hub id (default: build a tiny one)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    ap.add_argument("--rows", type=int, default=8, help="rows sampled together (default 8)")
    ap.add_argument("--new", type=int, default=64, help="tokens sampled per row in the single-turn bench")
    ap.add_argument("--turns", type=int, default=10, help="turns per row in the multi-turn bench")
    ap.add_argument("--action", type=int, default=8, help="tokens sampled per turn in the multi-turn bench")
    ap.add_argument("--repeats", type=int, default=5, help="repeats per measurement (the median is printed)")
    ap.add_argument("--gen-per-rollout", type=float, default=16.0,
                    help="generated ids per rollout for the projection (default 16: the main job's, tiny policy)")
    ap.add_argument("--obs-per-rollout", type=float, default=119.0,
                    help="observation ids per rollout for the projection (default 119: the main job's, tiny policy)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadier medians on a shared CPU)")


def _median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _sample(policy: HFPolicy, cache, feed: list[list[int]], steps: int, gen: torch.Generator) -> list[list[int]]:
    """Feed each row its ids, then sample ``steps`` tokens per row through the batched cache."""
    width = max(map(len, feed))
    tokens = torch.tensor([ids + [0] * (width - len(ids)) for ids in feed])
    logits = policy.step_last(cache, tokens, torch.tensor([len(ids) for ids in feed]))
    out: list[list[int]] = [[] for _ in feed]
    ones = torch.ones(len(feed), dtype=torch.long)
    for k in range(steps):
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
        for row, token in zip(out, nxt[:, 0].tolist()):
            row.append(token)
        if k < steps - 1:
            logits = policy.step_last(cache, nxt, ones)
    return out


def _generate(policy: HFPolicy, prompts: list[list[int]], new: int, gen_seed: int) -> list[list[int]]:
    """``model.generate`` of exactly ``new`` sampled tokens per left-padded prompt; the new ids."""
    lm = policy.causal
    width = max(map(len, prompts))
    pad = policy.layout.tok.pad_token_id or 0
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=policy.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=policy.device)
    torch.manual_seed(gen_seed)
    out = lm.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=True,
                      pad_token_id=pad, eos_token_id=None)
    return out[:, width:].tolist()


def bench_single_turn(policy: HFPolicy, rows: int, new: int, repeats: int) -> dict:
    env = envs.make(envs.BUGFIX_ID)
    prompts = [policy.layout.first(env.reset(seed=i, options={"task_index": i, "split": "train"})[0], 4096)[0]
               for i in range(rows)]
    env.close()
    ours = _median_seconds(lambda: _sample(policy, policy.new_cache(rows), prompts, new,
                                           torch.Generator().manual_seed(0)), repeats)
    base = _median_seconds(lambda: _generate(policy, prompts, new, 0), repeats)
    tokens = rows * new
    return {"bench": "single_turn", "ours_tok_s": tokens / ours, "baseline_tok_s": tokens / base,
            "ratio": base / ours, "target": TARGETS["single_turn"], "baseline": "model.generate"}


def _episodes(rows: int, turns: int) -> list[list[str]]:
    """Observations of ``rows`` LongHorizon-v3 oracle episodes with at least ``turns`` turns."""
    env = envs.make(envs.LONG_HORIZON_V3_ID, n_stages=max(turns, 8))
    out = []
    for i in range(rows):
        ep = run_episode(env, make_lh3_agent("oracle"), seed=i, options={"task_index": i, "split": "train"})
        out.append(ep.observations[:turns])
    env.close()
    return out


def bench_turns(policy: HFPolicy, rows: int, turns: int, action: int, repeats: int) -> dict:
    layout = policy.layout
    observations = _episodes(rows, turns)

    def ours() -> None:
        cache, gen = policy.new_cache(rows), torch.Generator().manual_seed(0)
        feed = [layout.first(obs[0], 10**6)[0] for obs in observations]
        for k in range(turns):
            acts = _sample(policy, cache, feed, action, gen)
            if k < turns - 1:  # the action's last id was sampled but not fed: it leads the next feed
                feed = [[a[-1], *layout.next(obs[k + 1])] for a, obs in zip(acts, observations)]

    def reencode() -> None:
        convs = [[*layout.head(), {"role": "user", "content": obs[0]}] for obs in observations]
        for k in range(turns):
            prompts = [layout.ids(conv, True) for conv in convs]
            acts = _generate(policy, prompts, action, k)
            for conv, obs, ids in zip(convs, observations, acts):
                conv.append({"role": "assistant", "content": layout.decode(ids)})
                if k < turns - 1:
                    conv.append({"role": "user", "content": obs[k + 1]})

    t_ours, t_base = _median_seconds(ours, repeats), _median_seconds(reencode, repeats)
    tokens = rows * turns * action
    return {"bench": "ten_turns" if turns == 10 else f"{turns}_turns", "ours_tok_s": tokens / t_ours,
            "baseline_tok_s": tokens / t_base, "ratio": t_base / t_ours, "target": TARGETS["ten_turns"],
            "baseline": "re-encode + generate every turn"}


def _trl_batch(trajs, pad: int) -> dict:
    """TRL's GRPO inputs for the same ids: prompt = the first turn's context (left-padded),
    completion = the rest (right-padded), ``tool_mask`` = the action mask (loss on sampled ids only)."""
    rows = []
    for t in trajs:
        s = t.segments[0]
        first = s.turns[0].start
        rows.append((s.tokens[:first], s.tokens[first:], s.action_mask[first:]))
    pw, cw = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    prompt = torch.tensor([[pad] * (pw - len(p)) + p for p, _, _ in rows])
    pmask = torch.tensor([[0] * (pw - len(p)) + [1] * len(p) for p, _, _ in rows])
    comp = torch.tensor([c + [pad] * (cw - len(c)) for _, c, _ in rows])
    cmask = torch.tensor([[1] * len(c) + [0] * (cw - len(c)) for _, c, _ in rows])
    tool = torch.tensor([m + [0] * (cw - len(m)) for _, _, m in rows])
    adv = torch.tensor([float(i % 2) - 0.5 for i in range(len(rows))])
    return {"prompt_ids": prompt, "prompt_mask": pmask, "completion_ids": comp, "completion_mask": cmask,
            "tool_mask": tool, "advantages": adv, "num_items_in_batch": tool.sum()}


def action_config(model_dir: str):
    """The validated training config of ``policy=hf policy.path=model_dir`` (default env, BugFix):
    its ``rollout.max_action_tokens`` is the budget derived from the model's tokenizer and its
    ``policy.max_len`` the context window a run uses."""
    from experiments.runtime.config import compose_config, validate

    return validate(compose_config(["policy=hf", f"policy.path={model_dir}"]))


def bench_rollout(policy: HFPolicy, rows: int, repeats: int, max_action_tokens: int, max_len: int) -> tuple[dict, list]:
    """``RolloutEngine.collect`` of ``rows`` BugFix rollouts (groups of 2) at the given budget:
    the row (observation + generated ids per second, no baseline) and the last collection."""
    eng = RolloutEngine(envs.BUGFIX_ID, num_envs=rows, max_len=max_len, max_action_tokens=max_action_tokens)
    reqs = make_requests(max(rows // 2, 1), 2, seed=0, task_indices=list(range(max(rows // 2, 1))))
    last: list = []

    def collect() -> None:
        last[:] = eng.collect(policy, reqs, generator=torch.Generator().manual_seed(0))
    try:
        seconds = _median_seconds(collect, repeats)
    finally:
        eng.close()
    tokens = sum(len(s.tokens) for t in last for s in t.segments)
    return ({"bench": "rollout", "ours_tok_s": tokens / seconds, "baseline_tok_s": float("nan"), "ratio": float("nan"),
             "target": float("nan"), "baseline": f"(none; RolloutEngine on BugFix, action budget {max_action_tokens})"},
            last)


def reading_config(model_dir: str):
    """The validated config of ``policy=hf`` on ``model_dir`` with the env's instructions as the
    system message (as ``policy=smollm2``) on the main job's reading tasks, in a 2048-id window
    (a small tokenizer spends over 1000 ids on the instructions)."""
    from experiments.runtime.config import compose_config, validate

    return validate(compose_config(["policy=hf", f"policy.path={model_dir}", "policy.env_instructions=true",
                                    "policy.max_len=2048", "experiment=bugfix_reading_tasks"]))


def bench_shared_prefix(model_dir: str, device: str, rows: int, repeats: int) -> tuple[dict, list, object]:
    """``RolloutEngine.collect`` of ``rows`` reading-task rollouts (groups of 2, the env's
    instructions as the system message) with shared-prefix sampling (``policy.shared_prefix``)
    next to the same collection without it: the same ids (observation + generated) per second.
    Returns the row, the last collection and the config."""
    from experiments.runtime.build import env_kwargs, hf_policy

    c = reading_config(model_dir)
    c.policy.device = device
    policy = hf_policy(c)
    eng = RolloutEngine(c.env.id, num_envs=rows, max_len=c.policy.max_len, max_action_tokens=c.rollout.max_action_tokens,
                        env_kwargs=env_kwargs(c))
    reqs = make_requests(max(rows // 2, 1), 2, seed=0, task_indices=list(range(max(rows // 2, 1))))
    seconds, tokens = {}, {}
    try:
        for share in (False, True):
            policy.share_prefix = share
            last: list = []
            seconds[share] = _median_seconds(
                lambda: last.__setitem__(slice(None), eng.collect(policy, reqs, generator=torch.Generator().manual_seed(0))),
                repeats)
            tokens[share] = sum(len(seg.tokens) for t in last for seg in t.segments)
    finally:
        eng.close()
    return ({"bench": "shared_rollout", "ours_tok_s": tokens[True] / seconds[True],
             "baseline_tok_s": tokens[False] / seconds[False],
             "ratio": seconds[False] / seconds[True] * tokens[True] / tokens[False], "target": 2.0,
             "baseline": "the same rollouts on reading tasks, every row prefilling its whole prompt"}, last, c)


def bench_shared_update(c, trajs: list, repeats: int) -> dict:
    """One GRPO ``trainer.update`` (LoRA r=8, ``policy.micro_batch_tokens`` of ``policy=smollm2``)
    on the reading-task rollouts ``trajs`` with the shared-prefix training forward next to the
    unshared one, from the same start weights each repeat: processed ids per second."""
    from experiments.runtime.build import hf_policy
    from experiments.runtime.config import compose_config

    # read unvalidated: validation resolves policy.path, which needs SmolLM2 fetched, and this
    # benchmark runs on whatever --model names
    budget = int(compose_config(["policy=smollm2"]).policy.micro_batch_tokens)
    c.policy.lora_r = 8
    trajs = [t for t in trajs if len(t.segments) == 1]
    for i, t in enumerate(trajs):
        t.train_reward = float(i % 2)
        t.segments[-1].turns[-1].reward = float(i % 2)
    tokens = sum(len(t.segments[0].tokens) for t in trajs)
    seconds = {}
    for share in (False, True):
        policy = hf_policy(c)
        policy.share_prefix = share
        algo = GrpoConfig(epochs=1, micro_batch_rows=len(trajs))
        trainer = make_trainer(algo.name, algo, policy)
        trainer.micro_batch_tokens = budget
        seconds[share] = _median_seconds(lambda: trainer.update(trajs), repeats)
        trainer = policy = None  # the next side loads its own copy
    return {"bench": "shared_update", "ours_tok_s": tokens / seconds[True], "baseline_tok_s": tokens / seconds[False],
            "ratio": seconds[False] / seconds[True], "target": 2.0,
            "baseline": f"the same GRPO update, every row's prompt in every forward (micro_batch_tokens {budget})"}


def bench_update(model_dir: str, device: str, trajs: list, repeats: int) -> dict:
    """One GRPO ``trainer.update`` on the single-segment ``trajs`` (rewards alternate 0 / 1), in
    processed ids/s, next to TRL's step on the same ids when TRL is installed (else no baseline)."""
    trajs = [t for t in trajs if len(t.segments) == 1]
    for i, t in enumerate(trajs):
        t.train_reward = float(i % 2)
        t.segments[-1].turns[-1].reward = float(i % 2)
    tokens = sum(len(t.segments[0].tokens) for t in trajs)
    policy = load_policy(model_dir, device=device, dtype="float32")
    algo = GrpoConfig(epochs=1, micro_batch_rows=len(trajs))
    trainer = make_trainer(algo.name, algo, policy)
    ours = _median_seconds(lambda: trainer.update(trajs), repeats)
    trainer = policy = None  # TRL's side loads its own copy of the model
    base = _trl_seconds(model_dir, device, trajs, repeats)
    return {"bench": "grpo_update", "ours_tok_s": tokens / ours, "baseline_tok_s": tokens / base, "ratio": base / ours,
            "target": float("nan"), "baseline": "TRL GRPOTrainer.compute_loss + backward + step"
            if base == base else "(TRL not installed)"}


def _trl_seconds(model_dir: str, device: str, trajs: list, repeats: int) -> float:
    """Median seconds of TRL's ``GRPOTrainer`` loss + backward + AdamW step on ``trajs``' ids
    (NaN when TRL is not installed)."""
    try:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        return float("nan")
    with tempfile.TemporaryDirectory() as out:
        trl_policy = load_policy(model_dir, device=device, dtype="float32")
        args = GRPOConfig(output_dir=out, use_cpu=device == "cpu", bf16=False, per_device_train_batch_size=len(trajs),
                          num_generations=2, max_steps=1, learning_rate=1e-5, report_to="none", save_strategy="no",
                          loss_type="bnpo", beta=0.0, seed=0)
        trl = GRPOTrainer(model=trl_policy.causal, args=args, processing_class=trl_policy.layout.tok,
                          train_dataset=Dataset.from_list([{"prompt": "x"}] * len(trajs)), reward_funcs=[lambda **k: [0.0]])
        trl.current_gradient_accumulation_steps = 1  # set by Trainer.train; one step, no accumulation
        batch = {k: v.to(trl_policy.device) for k, v in _trl_batch(trajs, trl_policy.layout.tok.pad_token_id or 0).items()}
        opt = torch.optim.AdamW(trl_policy.causal.parameters(), lr=1e-5)
        trl_policy.causal.train()

        def trl_step() -> None:
            opt.zero_grad(set_to_none=True)
            trl.compute_loss(trl_policy.causal, batch).backward()
            opt.step()
        return _median_seconds(trl_step, repeats)


def main_job_shape() -> dict:
    """The main job's size, read from its definition (the default compare preset's composed config):
    ``rollouts`` per run (``budget.amount``, a rollout budget), ``runs`` (methods x seeds of its
    sweep) and ``jobs`` run at a time (its launcher's ``n_jobs``)."""
    import warnings

    from hydra import compose, initialize_config_dir

    from experiments.compare.job import DEFAULT_METHODS, DEFAULT_PRESET, PRESETS
    from experiments.runtime.config import CONFIG_DIR, register_configs

    register_configs()
    with warnings.catch_warnings(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        warnings.simplefilter("ignore", UserWarning)  # hydra's schema-matching notice for the joblib launcher
        c = compose(config_name="config", overrides=[f"experiment={PRESETS[DEFAULT_PRESET]}"], return_hydra_config=True)
    if c.budget.kind != "rollouts":
        raise ValueError(f"the main job's budget.kind is {c.budget.kind!r}; the projection needs 'rollouts'")
    seeds = str(c.hydra.sweeper.params.seed).split(",")
    return {"rollouts": float(c.budget.amount), "runs": len(DEFAULT_METHODS) * len(seeds),
            "jobs": int(c.hydra.launcher.n_jobs)}


def project_main_job(rollout_tok_s: float, update_tok_s: float, rollouts: float, gen_per_rollout: float,
                     obs_per_rollout: float, runs: int, jobs: int) -> dict:
    """Arithmetic, not a measurement: one run's ids (``rollouts x (gen + obs)``) at the rollout
    rate and at the update rate (seconds each), and the whole job's minutes with ``runs`` runs
    ``jobs`` at a time (``runs / jobs`` run lengths)."""
    ids = rollouts * (gen_per_rollout + obs_per_rollout)
    rollout_s, update_s = ids / rollout_tok_s, ids / update_tok_s
    return {"rollout_s": rollout_s, "update_s": update_s, "minutes": (rollout_s + update_s) * runs / jobs / 60}


def _check(a: argparse.Namespace) -> str | None:
    """The first invalid argument's one-line message, or None."""
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        return f"--device={a.device}: no CUDA device here; allowed: cpu"
    for name in ("rows", "new", "turns", "action", "repeats", "threads"):
        if getattr(a, name) < 1:
            return f"--{name}={getattr(a, name)} invalid; allowed: an int >= 1"
    for name in ("gen_per_rollout", "obs_per_rollout"):
        if not getattr(a, name) >= 0:
            return f"--{name.replace('_', '-')}={getattr(a, name)} invalid; allowed: a number >= 0"
    return None


def _benches(a: argparse.Namespace, model: str) -> list[dict]:
    """Every bench's row on ``model``: single turn, multi-turn, rollout, GRPO update."""
    c = action_config(model)
    policy = load_policy(model, device=a.device, dtype="float32")
    results = [bench_single_turn(policy, a.rows, a.new, a.repeats),
               bench_turns(policy, a.rows, a.turns, a.action, a.repeats)]
    rollout, trajs = bench_rollout(policy, a.rows, a.repeats, c.rollout.max_action_tokens, c.policy.max_len)
    del policy  # one model in memory at a time: each later bench loads its own
    shared, reading, rc = bench_shared_prefix(model, a.device, a.rows, a.repeats)
    return [*results, rollout, bench_update(model, a.device, trajs, a.repeats), shared,
            bench_shared_update(rc, reading, a.repeats)]


def run(a: argparse.Namespace) -> int:
    problem = _check(a)
    if problem:
        print(problem)
        return 2
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or str(build_tiny_model_dir(Path(tmp) / "hf_tiny", TinyModelSpec()))
        results = _benches(a, model)
    print(f"model {a.model or 'tiny (experiments.runtime.hf_tiny)'} on {a.device}, rows {a.rows}, {a.threads} torch thread(s), "
          f"median of {a.repeats}")
    print(f"{'bench':<14} {'ours tok/s':>11} {'baseline tok/s':>15} {'ratio':>6} {'target':>7}  baseline")
    for r in results:
        target = "" if r["target"] != r["target"] else f">= {r['target']:g}x"
        base, ratio = ("-", "-") if r["ratio"] != r["ratio"] else (f"{r['baseline_tok_s']:.0f}", f"{r['ratio']:.2f}x")
        print(f"{r['bench']:<14} {r['ours_tok_s']:>11.0f} {base:>15} {ratio:>6} {target:>7}  {r['baseline']}")
    if a.device.startswith("cuda"):
        print(f"peak CUDA memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    rate = {r["bench"]: r["ours_tok_s"] for r in results}
    job = main_job_shape()
    p = project_main_job(rate["rollout"], rate["grpo_update"], job["rollouts"], a.gen_per_rollout, a.obs_per_rollout,
                         job["runs"], job["jobs"])
    print(f"projected main job on this model: {p['minutes']:.1f} min on this CPU (rollout {p['rollout_s']:.0f} s + "
          f"update {p['update_s']:.0f} s per run)")
    print(f"  arithmetic from the measured rates, not a measurement: {job['rollouts']:.0f} rollouts x "
          f"({a.gen_per_rollout:g} generated + {a.obs_per_rollout:g} observation ids) per run, {job['runs']} runs, "
          f"{job['jobs']} at a time")
    return 0


__all__ = ["action_config", "add_arguments", "bench_rollout", "bench_shared_prefix", "bench_shared_update", "bench_single_turn", "bench_turns",
           "bench_update", "reading_config",
           "main_job_shape", "project_main_job", "run"]
