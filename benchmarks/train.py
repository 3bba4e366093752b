"""The body of ``python -m benchmarks train``: training-side throughput against raw-torch bounds.

Everything is measured in the same process, side by side, with the same model and batch:

1. **Rollout generation**: the batched ``RolloutEngine`` (BugFix envs, bookkeeping, prefill of
   observations, continuous batching) in generated tokens/s, next to a raw-torch loop of the same
   model and batch that replays exactly the engine's forwards (the same prefill chunks and decode
   steps, recorded with ``collect(trace=...)``, plus sampling; no envs, no bookkeeping). Ratio =
   engine tokens/s / raw tokens/s (target >= 0.8). Also printed: the ratio to a pure one-token
   decode loop (no observation tokens to prefill at all; what envs' observations cost), and the
   engine's time split (model / env / rest).
2. **Update**: ``trainer.update`` (GRPO and PPO) in processed tokens/s (tokens x epochs), next to a
   raw forward + backward + optimizer step over the same padded batch, the same number of times
   (for PPO through the policy and its separate critic). Ratio = update tokens/s / raw tokens/s
   (target >= 0.8; PPO also pays for one old-policy/old-value pass per update, which the raw
   bound does not: with 2 epochs its ceiling is 6 / 7 = 0.86).
3. **Per-turn cost on LongHorizon-v3** at 8, 32 and 128 decisions, with and without compression: a
   scripted oracle episode is laid out exactly like a rollout (``demo_to_trajectory``) and replayed
   turn by turn through the KV cache (each turn: its action, EOS, observation, SEP, then the next
   token's logits). Printed: mean context tokens per turn, ms per turn, tokens fed per turn, and
   the ratio of ms per turn at 128 to 8 decisions (compression on: the cost stays flat).

The policy is the default tiny one (d_model 64, 2 layers, 4 heads); the rollout bench starts from
the default BugFix warm start (built and cached on first use) so actions are realistic.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

import envs
from algos.batch import collate
from algos.policy import PolicyModel, PolicyShape, ValueModel
from algos.policy import shift_logprobs
from algos.registry import trainer_traits
from algos.requests import make_requests
from algos.recording import demo_to_trajectory
from algos.trainer import make_trainer
from experiments.compare.job import DEFAULT_METHODS
from envs.long_horizon_v3_agents import make_agent as make_lh3_agent
from envs.tokenizer import get_tokenizer
from experiments.runtime.build import load_policy_weights, policy_shape, rollouts_per_update, train_engine
from experiments.runtime.config import compose_config, validate
from experiments.runtime.seeds import mix_seed
from experiments.runtime.warmstart import ensure_warmstart, play_demo

TARGET = 0.8


#: ``--quick``: the tiny preset's model and warm start, one repeat, a few envs, no per-turn table
#: (seconds instead of minutes; the numbers only show that the benchmark runs)
QUICK_OVERRIDES = ("experiment=tiny",)


def _default_config(*extra: str, **overrides):
    """The composed, validated default config with ``group=option`` overrides and ``extra``
    override strings (e.g. ``experiment=tiny``)."""
    return validate(compose_config([f"{k}={v}" for k, v in overrides.items()] + list(extra)))


def raw_decode(model: PolicyModel, batch: int, steps: int, prompt_len: int, seed: int = 0) -> float:
    """Seconds for ``steps`` forwards of a plain KV-cache decode loop: batch ``batch``, one
    sampled token per row per forward after a ``prompt_len``-token prefill (not timed)."""
    gen = torch.Generator().manual_seed(seed)
    cache = model.new_cache(batch)
    with torch.no_grad():
        tok = torch.randint(5, model.shape.vocab_size, (batch, prompt_len), generator=gen)
        logits = model.step_last(cache, tok, torch.full((batch,), prompt_len))
        ones = torch.ones(batch, dtype=torch.long)
        t0 = time.perf_counter()
        for _ in range(steps):
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
            logits = model.step_last(cache, nxt, ones)
        return time.perf_counter() - t0


def raw_replay(model: PolicyModel, trace: list, batch: int, temperature: float = 1.0, seed: int = 0) -> float:
    """Seconds to push the engine's exact token stream (``trace``: every prefill and decode
    forward's inputs, and row resets) through the model with plain torch calls and sample from
    every decode forward's logits: the same model work without envs or bookkeeping."""
    gen = torch.Generator().manual_seed(seed)
    cache = model.new_cache(batch)
    with torch.no_grad():
        t0 = time.perf_counter()
        for kind, inp, n, rows in trace:
            if kind == "reset":
                cache.lengths[inp] = 0
            elif kind == "prefill":
                model.prefill(cache, inp, n, rows=rows)
            else:
                logits = model.step_last(cache, inp, n)
                torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen)
        return time.perf_counter() - t0


def bench_rollout(repeats: int = 3, num_envs: int = 64, overrides: tuple[str, ...] = ()) -> dict:
    c = _default_config(*overrides, logger="none")
    info = ensure_warmstart(c, verbose=False)
    model = PolicyModel(policy_shape(c))
    load_policy_weights(model, info.path)
    model.eval()
    engine = train_engine(c, num_envs=num_envs)
    eng_tps, replay_tps, raw_tps, split = [], [], [], []
    for r in range(repeats):
        # 4 x num_envs requests: slots are refilled as episodes end (the steady state of a collect)
        reqs = make_requests(4 * num_envs, 1, seed=mix_seed(0, r), split="train", task_indices=list(range(4 * num_envs)))
        trace: list = []
        trajs = engine.collect(model, reqs, generator=torch.Generator().manual_seed(r), trace=trace)
        gen = sum(t.generated_tokens for t in trajs)
        obs = sum(t.observation_tokens for t in trajs)
        tm = dict(engine.timing, generated=gen, observed=obs)
        eng_tps.append(gen / tm["total"])
        split.append(tm)
        # bound 1 (replay): the engine's exact forwards (prefill + decode), plain torch, no envs
        replay_tps.append(gen / raw_replay(model, trace, num_envs, seed=r))
        # bound 2 (pure decode): the same number of decode forwards, one sampled token per row,
        # no observation tokens at all
        prompt = int(statistics.mean(len(t.segments[0].tokens) for t in trajs))
        secs = raw_decode(model, num_envs, int(tm["forwards"]), prompt, seed=r)
        raw_tps.append(num_envs * tm["forwards"] / secs)
    engine.close()
    med = sorted(range(repeats), key=lambda i: eng_tps[i] / replay_tps[i])[repeats // 2]
    tm = split[med]
    return {"engine_tps": eng_tps[med], "replay_tps": replay_tps[med], "raw_tps": raw_tps[med],
            "ratio": eng_tps[med] / replay_tps[med], "ratio_decode": eng_tps[med] / raw_tps[med],
            "model_s": tm["model"], "env_s": tm["env"], "total_s": tm["total"], "forwards": tm["forwards"],
            "prefill_forwards": tm["prefill_forwards"], "generated": tm["generated"], "observed": tm["observed"],
            "num_envs": num_envs, "start_success": info.start_success}


def raw_update(model: PolicyModel, critic, tokens: torch.Tensor, mask: torch.Tensor, passes: int, lr: float) -> float:
    """Seconds for ``passes`` x (forward + token log-prob loss + backward + AdamW step) over the
    same padded batch: the bound for a training update (no advantages, ratios, bookkeeping)."""
    params = list(model.parameters()) + (list(critic.parameters()) if critic is not None else [])
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95))
    model.train()
    t0 = time.perf_counter()
    for _ in range(passes):
        logits, _ = model(tokens)
        loss = -(shift_logprobs(logits, tokens) * mask).sum() / mask.sum()
        if critic is not None:
            loss = loss + ((critic(tokens) ** 2) * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def bench_update(algo_name: str, repeats: int = 3, overrides: tuple[str, ...] = ()) -> dict:
    c = _default_config(*overrides, logger="none", algo=algo_name)
    info = ensure_warmstart(c, verbose=False)
    base = PolicyModel(policy_shape(c))
    load_policy_weights(base, info.path)
    engine = train_engine(c, num_envs=min(64, rollouts_per_update(c)))
    reqs = make_requests(c.algo.tasks_per_update, c.algo.group_size, seed=1, split="train",
                         task_indices=list(range(c.algo.tasks_per_update)))
    trajs = engine.collect(base, reqs, generator=torch.Generator().manual_seed(1))
    engine.close()
    batch = collate(trajs)
    tokens = int(batch.valid.sum())
    passes = c.algo.epochs * c.algo.minibatches  # optimizer steps per update
    upd, raw = [], []
    for _ in range(repeats):
        has_critic = trainer_traits(algo_name).critic
        shape = policy_shape(c, critic="separate" if has_critic else "none")
        policy = PolicyModel(shape)
        policy.load_state_dict(base.state_dict())
        critic = ValueModel(shape) if has_critic else None
        trainer = make_trainer(algo_name, c.algo, policy, critic, None, c.rollout.temperature)
        t0 = time.perf_counter()
        trainer.update(copy.deepcopy(trajs))
        upd.append(tokens * c.algo.epochs / (time.perf_counter() - t0))
        # raw: the same padded batch through forward+backward+step, the same number of tokens
        # (``epochs`` full passes, split into ``minibatches`` optimizer steps)
        p2 = PolicyModel(policy_shape(c))
        p2.load_state_dict(base.state_dict())
        c2 = ValueModel(shape) if has_critic else None  # PPO's bound includes its critic
        width = int(batch.valid.sum(1).max())
        secs = 0.0
        for chunk in torch.arange(batch.num_rows).chunk(c.algo.minibatches):
            secs += raw_update(p2, c2, batch.tokens[chunk, :width], batch.action_mask[chunk, :width],
                               c.algo.epochs, c.algo.lr)
        raw.append(tokens * c.algo.epochs / secs)
    med = sorted(range(repeats), key=lambda i: upd[i] / raw[i])[repeats // 2]
    return {"algo": algo_name, "update_tps": upd[med], "raw_tps": raw[med], "ratio": upd[med] / raw[med],
            "tokens": tokens, "rows": batch.num_rows, "epochs": c.algo.epochs, "minibatches": c.algo.minibatches,
            "passes": passes}


def bench_turn_cost(stages_list=(8, 32, 128)) -> list[dict]:
    """Per-turn cost of a LongHorizon-v3 oracle episode of ``n_stages`` decisions, without and with
    ``structured_summary`` compression (token trigger at 384): the episode laid out like a rollout
    and replayed through the tiny policy's KV cache, each turn's env-written ids fed up to the next
    action. Compression restarts the cache at every new segment, so the context stays bounded."""
    tok = get_tokenizer()
    out = []
    for n_stages in stages_list:
        for comp_name, comp in (("none", None),
                                ("structured_summary", dict(strategy="structured_summary", trigger="tokens",
                                                            budget_tokens=384, max_compactions=10_000))):
            env = envs.make(envs.LONG_HORIZON_V3_ID, compression=comp, n_stages=n_stages, time_limit="termination")
            obs, acts, rews, infos, term, trunc = play_demo(env, make_lh3_agent("oracle"), seed=0,
                                                            options={"task_index": 0, "split": "train"})
            env.close()
            max_len = 16_384
            tr = demo_to_trajectory(obs, acts, rews, infos, term, trunc, max_len=max_len, max_action_tokens=16)
            torch.manual_seed(0)
            model = PolicyModel(PolicyShape(vocab_size=tok.vocab_size, max_len=max_len)).eval()
            cache = model.new_cache(1)
            fed, ctx_lens = 0, []
            t0 = time.perf_counter()
            for seg in tr.segments:
                cache.reset_rows([0])
                starts = [t.start for t in seg.turns] + [len(seg.tokens)]
                prev = 0
                for s in starts:  # feed everything up to the next action, then sample-position logits
                    chunk = seg.tokens[prev:s]
                    if chunk:
                        model.step_last(cache, torch.tensor([chunk]), torch.tensor([len(chunk)]))
                        fed += len(chunk)
                        ctx_lens.append(int(cache.lengths[0]))
                    prev = s
            secs = time.perf_counter() - t0
            n = max(tr.turns, 1)
            out.append({"n_stages": n_stages, "turns": tr.turns, "compression": comp_name, "verified": tr.verified,
                        "segments": len(tr.segments), "mean_context": statistics.mean(ctx_lens),
                        "max_context": max(ctx_lens), "ms_per_turn": 1000 * secs / n, "tokens_per_turn": fed / n})
    return out


def turn_cost_ratios(rows: list[dict]) -> dict[str, float]:
    """ms per turn at the longest horizon / at the shortest, per compression setting."""
    out = {}
    for comp in dict.fromkeys(r["compression"] for r in rows):
        mine = sorted((r for r in rows if r["compression"] == comp), key=lambda r: r["n_stages"])
        out[comp] = mine[-1]["ms_per_turn"] / mine[0]["ms_per_turn"]
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=3, help="repeats per measurement (median reported)")
    parser.add_argument("--num-envs", type=int, default=64, help="envs in the batched rollout")
    parser.add_argument("--skip-turns", action="store_true", help="skip the LongHorizon per-turn cost table")
    parser.add_argument("--quick", action="store_true",
                        help="seconds, not minutes: tiny model and warm start, 1 repeat, 8 envs, no per-turn table")


def run(args: argparse.Namespace) -> int:
    torch.set_num_threads(1)
    overrides: tuple[str, ...] = ()
    if args.quick:
        args.repeats, args.num_envs, args.skip_turns, overrides = 1, 8, True, QUICK_OVERRIDES
    r = bench_rollout(args.repeats, args.num_envs, overrides)
    print(f"rollout generation (BugFix easy, {r['num_envs']} envs, {4 * r['num_envs']} episodes, tiny policy from the "
          f"warm start, start success {r['start_success']:.2f}): {r['generated']} generated + {r['observed']} observation tokens")
    print(f"  engine {r['engine_tps']:9.0f} generated tok/s | raw replay of the same forwards {r['replay_tps']:9.0f} tok/s | "
          f"ratio {r['ratio']:.2f} (target >= {TARGET}) {'OK' if r['ratio'] >= TARGET else 'BELOW TARGET'}")
    print(f"  vs a pure 1-token decode loop (no observation tokens to prefill) {r['raw_tps']:9.0f} tok/s: ratio {r['ratio_decode']:.2f}")
    print(f"  engine time: model {r['model_s']:.3f}s, env {r['env_s']:.3f}s, other {r['total_s'] - r['model_s'] - r['env_s']:.3f}s; "
          f"{r['forwards']} decode + {r['prefill_forwards']} prefill batched forwards")
    for algo in DEFAULT_METHODS:  # the main job's methods (GRPO, PPO)
        u = bench_update(algo, args.repeats, overrides)
        print(f"update {algo} ({u['rows']} rows, {u['tokens']} tokens, {u['epochs']} epoch(s) x {u['minibatches']} minibatch(es)):")
        print(f"  update {u['update_tps']:9.0f} tok/s | raw fwd+bwd+step {u['raw_tps']:9.0f} tok/s | "
              f"ratio {u['ratio']:.2f} (target >= {TARGET}) {'OK' if u['ratio'] >= TARGET else 'BELOW TARGET'}")
    if not args.skip_turns:
        print("per-turn cost on LongHorizon-v3 (oracle episode replayed through the KV cache, tiny policy):")
        print(f"  {'stages':>6} {'turns':>5} {'compression':>18} {'segments':>8} {'mean ctx':>8} {'max ctx':>8} "
              f"{'tok/turn':>8} {'ms/turn':>8}")
        rows = bench_turn_cost()
        for t in rows:
            print(f"  {t['n_stages']:6d} {t['turns']:5d} {t['compression']:>18} {t['segments']:8d} {t['mean_context']:8.0f} "
                  f"{t['max_context']:8d} {t['tokens_per_turn']:8.1f} {t['ms_per_turn']:8.2f}")
        for comp, ratio in turn_cost_ratios(rows).items():
            print(f"  ms/turn at {rows[-1]['n_stages']} / at {rows[0]['n_stages']} stages, compression {comp}: {ratio:.2f}x")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.train", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
