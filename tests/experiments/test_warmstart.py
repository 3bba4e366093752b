"""Behaviour-cloning warm start: demonstrations laid out like rollouts, BC, caching by config hash."""

import json
import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from algos.policy import PolicyModel
from envs.tokenizer import get_tokenizer
from envs.episode import run_episode
from experiments.runtime.build import load_policy_weights, make_env, policy_shape
from experiments.runtime.config import register_configs, validate
import experiments.runtime.warmstart as warmstart
from experiments.runtime.warmstart import (cache_key, demo_actions, demo_episodes, demonstrations, ensure_warmstart,
                                          make_demo_agent)

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
register_configs()
torch.set_num_threads(1)


def tiny(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=tiny", "env=bugfix",
                                                       f"warmstart.cache_dir={tmp_path}", *overrides])
    return validate(cfg)


def test_demonstrations_mark_only_the_demo_actions_as_sampled(tmp_path):
    c = tiny(tmp_path, "warmstart.demos=4")
    tok = get_tokenizer()
    for tr in demonstrations(c):
        for s in tr.segments:
            for t in s.turns:
                assert s.tokens[t.end] == tok.eos_id and not t.capped
                assert s.action_mask[t.start: t.end + 1] == [1] * (t.end - t.start + 1)
                assert s.tokens[t.start - 1] == tok.sep_id
            assert sum(s.action_mask) == sum(t.end - t.start + 1 for t in s.turns)
            assert set(s.policy_version) <= {-1}  # demos: no policy version sampled them


def test_demo_actions_are_played_once_then_read_from_the_cache_until_a_knob_or_the_source_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(warmstart, "_DEMO_ACTIONS", {})  # a test before may have read this setting in this process
    c = tiny(tmp_path, "warmstart.demos=4")
    played = {a for episode in demo_episodes(c) for a in episode[1]}  # the reference: the 4 demos played here
    assert demo_actions(c) == played and len(played) > 1
    (cached,) = (tmp_path / "demo_actions").glob("*.json")
    assert json.loads(cached.read_text()) == sorted(played)

    def no_play(_c):
        raise AssertionError("the demonstrations were played again")
    monkeypatch.setattr(warmstart, "demo_episodes", no_play)
    warmstart._DEMO_ACTIONS.clear()  # a new process: nothing in memory
    assert demo_actions(c) == played  # read from the file
    for changed in (lambda: tiny(tmp_path, "warmstart.demos=5"), lambda: tiny(tmp_path, "warmstart.noise=0.9")):
        with pytest.raises(AssertionError, match="played again"):
            demo_actions(changed())
    monkeypatch.setattr(warmstart, "demo_source_sha256", lambda: "0" * 64)  # the envs' code changed
    with pytest.raises(AssertionError, match="played again"):
        demo_actions(c)


@pytest.mark.slow
def test_warm_start_is_built_once_and_cached_by_config(tmp_path):
    # behaviour cloning of more than one step, so that its loss can fall: 32 demos x 2 epochs at
    # warmstart.batch_rows 32 = 2 steps (the tiny preset's 16 x 1 is one)
    bc = ("warmstart.demos=32", "warmstart.epochs=2")
    c = tiny(tmp_path, *bc)
    info = ensure_warmstart(c, verbose=False)
    path = Path(info.path)
    assert path.exists() and 0.0 <= info.start_success <= 1.0
    assert info.bc_loss_last < info.bc_loss_first
    stamp = os.path.getmtime(path)
    again = ensure_warmstart(c, verbose=False)
    assert (again.path, again.key, again.start_success) == (info.path, info.key, info.start_success)
    assert os.path.getmtime(path) == stamp  # cache hit: nothing rebuilt
    assert json.loads((path.parent / "warmstart.json").read_text())["start_success"] == info.start_success
    # a different demo noise is a different start model
    assert cache_key(tiny(tmp_path, *bc, "warmstart.noise=0.9")) != cache_key(c)
    # ... where the cache lives (an operational field) or the algorithm is not
    assert cache_key(tiny(tmp_path / "elsewhere", *bc)) == cache_key(c)
    assert cache_key(tiny(tmp_path, *bc, "algo=ppo")) == cache_key(c)
    # the checkpoint loads into the policy, with or without a value head
    for critic in ("none", "head"):
        load_policy_weights(PolicyModel(policy_shape(c, critic=critic)), info.path)


@pytest.mark.slow
def test_the_cached_start_success_does_not_depend_on_which_run_built_it(tmp_path):
    """The runs of every seed share one cached warm start, so its start-model evaluation must not
    depend on the seed of the run that built it first (it used to: the demo's start model read
    0.528 or 0.537 depending on which of its first two jobs won the cache lock). It uses
    ``start_eval_seed`` (of ``warmstart.seed``): the episodes seed 0's runs are evaluated on."""
    from algos.evaluation import evaluate
    from experiments.runtime.build import eval_engine, eval_seed, start_eval_seed

    def config(seed: int):  # learn_tiny: a start model that writes real tool calls (faults, retries)
        with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
            return validate(compose(config_name="config", overrides=[
                "experiment=learn_tiny", f"seed={seed}", f"warmstart.cache_dir={tmp_path / f's{seed}'}",
                "warmstart.eval_tasks=8", "warmstart.eval_samples_per_task=8"]))

    c0, c3 = config(0), config(3)
    built = {0: ensure_warmstart(c0, verbose=False), 3: ensure_warmstart(c3, verbose=False)}
    assert built[0].key == built[3].key  # the run seed is not part of the warm start
    same = lambda a, b: json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN == NaN here
    assert same(built[0].start_eval, built[3].start_eval)
    assert start_eval_seed(c3) == start_eval_seed(c0) == eval_seed(c0) != eval_seed(c3)
    model = PolicyModel(policy_shape(c3))
    load_policy_weights(model, built[3].path)

    def evaluated(seed: int) -> dict:
        engine = eval_engine(c3, 64, max_envs=64)
        out = evaluate(engine, model, 8, 8, c3.eval.temperature, seed=seed, split=c3.eval.split)
        engine.close()
        return out

    held = {k: v for k, v in built[3].start_eval.items() if k.startswith("eval/")}
    assert same(evaluated(start_eval_seed(c3)), held)  # the cached numbers are these episodes' ...
    assert not same(evaluated(eval_seed(c3)), held)  # ... and seed 3's own episodes read differently


def test_behaviour_clone_loss_is_the_full_logits_cross_entropy(tmp_path):
    """BC computes logits only before the action tokens (``forward_at``); its first loss (no step
    taken yet) must equal the token-mean cross-entropy from the full ``model(tokens)`` logits on
    the same first minibatch (the permutation of ``torch.Generator().manual_seed(seed)``)."""
    from algos.batch import collate
    from algos.policy import shift_logprobs
    from experiments.runtime.bc import behaviour_clone

    c = tiny(tmp_path, "warmstart.demos=6")
    trajs = demonstrations(c)
    torch.manual_seed(0)
    model = PolicyModel(policy_shape(c))
    batch = collate(trajs)
    idx = torch.randperm(batch.num_rows, generator=torch.Generator().manual_seed(3))[:4]
    width = int(batch.valid[idx].sum(1).max())
    tokens, mask = batch.tokens[idx][:, :width], batch.action_mask[idx][:, :width]
    with torch.no_grad():
        logits, _ = model(tokens)
        expected = float(-(shift_logprobs(logits, tokens) * mask).sum() / mask.sum())
    losses = behaviour_clone(model, trajs, epochs=1, lr=1e-3, batch_rows=4, seed=3)
    assert losses[0] == pytest.approx(expected, rel=1e-5)


def _padded_reference_bc(model, trajs, epochs: int, lr: float, batch_rows: int, seed: int,
                         logits: str = "full") -> list[float]:
    """BC as it was before micro-batching: one forward of each minibatch padded to its longest row,
    rows in the permutation's order, the same permutations, schedule and clipping. ``logits``:
    ``"full"`` (``model(tokens)`` and ``shift_logprobs``: an independent path) or ``"forward_at"``
    (the pre-micro-batch code's own ops, for bitwise comparisons)."""
    from algos.batch import collate
    from algos.policy import shift_logprobs, token_logprobs

    batch = collate(trajs)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    r = batch.num_rows
    steps = epochs * ((r + batch_rows - 1) // batch_rows)
    warm = max(1, min(20, steps // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.1, 1 - s / max(steps, 1)))
    losses = []
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(r, generator=gen).split(batch_rows):
            width = int(batch.valid[idx].sum(1).max())
            tokens, mask = batch.tokens[idx][:, :width], batch.action_mask[idx][:, :width]
            if logits == "full":
                lp = shift_logprobs(model(tokens)[0], tokens)
            else:
                lp = token_logprobs(model.forward_at(tokens, mask > 0)[0], tokens, mask > 0)[0]
            loss = -(lp * mask).sum() / mask.sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
    return losses


def test_length_bucketed_behaviour_clone_matches_one_padded_forward_per_minibatch(tmp_path):
    """BC's micro-batches (rows of near-equal length, each trimmed to its own longest row, losses
    summed over the minibatch's action tokens) give the same losses and weights as one padded
    forward per minibatch; and the demos' minibatches really are split (else nothing is tested)."""
    from algos.batch import collate, row_lengths
    from experiments.runtime.bc import bc_micro_batches, behaviour_clone

    c = tiny(tmp_path, "warmstart.demos=24", "warmstart.noise=0.5")
    trajs = demonstrations(c)
    batch = collate(trajs)
    lengths = row_lengths(batch)
    idx = torch.randperm(batch.num_rows, generator=torch.Generator().manual_seed(5))[:8]
    parts = bc_micro_batches(lengths, idx)
    assert sorted(torch.cat(parts).tolist()) == sorted(idx.tolist())
    split = [bc_micro_batches(lengths, i) for i in torch.randperm(batch.num_rows, generator=torch.Generator().manual_seed(5)).split(8)]
    assert any(len(p) > 1 for p in split), "no minibatch was split: the demos are all one length"
    padded = sum(len(i) * int(lengths[i].max()) for i in torch.randperm(batch.num_rows, generator=torch.Generator().manual_seed(5)).split(8))
    bucketed = sum(len(r) * int(lengths[r].max()) for p in split for r in p)
    assert bucketed < padded

    torch.manual_seed(0)
    fast = PolicyModel(policy_shape(c))
    slow = PolicyModel(policy_shape(c))
    slow.load_state_dict(fast.state_dict())
    got = behaviour_clone(fast, trajs, epochs=2, lr=3e-3, batch_rows=8, seed=5)
    want = _padded_reference_bc(slow, trajs, epochs=2, lr=3e-3, batch_rows=8, seed=5)
    assert got == pytest.approx(want, rel=1e-4, abs=1e-5)
    for (name, a), b in zip(fast.state_dict().items(), slow.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-5), name


def test_a_token_budget_splits_behaviour_clone_micro_batches_without_changing_it(tmp_path):
    """``max_tokens`` (policy.micro_batch_tokens) keeps every micro-batch within the budget (or one
    row) and the losses and weights equal the unbudgeted BC's within float tolerance."""
    from algos.batch import collate, row_lengths
    from experiments.runtime.bc import bc_micro_batches, behaviour_clone

    c = tiny(tmp_path, "warmstart.demos=24", "warmstart.noise=0.5")
    trajs = demonstrations(c)
    lengths = row_lengths(collate(trajs))
    budget = int(lengths.max()) + 1  # one longest row fits, two do not
    idx = torch.arange(8)
    parts = bc_micro_batches(lengths, idx, budget)
    assert sorted(torch.cat(parts).tolist()) == idx.tolist()
    assert all(len(p) == 1 or len(p) * int(lengths[p].max()) <= budget for p in parts)
    assert len(parts) > len(bc_micro_batches(lengths, idx)), "the budget split nothing"
    torch.manual_seed(0)
    budgeted = PolicyModel(policy_shape(c))
    free = PolicyModel(policy_shape(c))
    free.load_state_dict(budgeted.state_dict())
    got = behaviour_clone(budgeted, trajs, epochs=2, lr=3e-3, batch_rows=8, seed=5, max_tokens=budget)
    want = behaviour_clone(free, trajs, epochs=2, lr=3e-3, batch_rows=8, seed=5)
    assert got == pytest.approx(want, rel=1e-4, abs=1e-5)
    for (name, a), b in zip(budgeted.state_dict().items(), free.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-5), name


def test_data_parallel_behaviour_clone_matches_one_process(tmp_path):
    """``processes=2`` (two ranks, each its share of every minibatch, gradients summed by
    all_reduce) gives the one-process losses and weights up to float summation order; the shares
    partition each minibatch; a bad process count is a one-line error."""
    from algos.batch import collate, row_lengths
    from experiments.runtime.bc import behaviour_clone, rank_share

    c = tiny(tmp_path, "warmstart.demos=16", "warmstart.noise=0.5")
    trajs = demonstrations(c)
    lengths = row_lengths(collate(trajs))
    idx = torch.arange(min(8, len(trajs)))
    a, b = rank_share(lengths, idx, 0, 2), rank_share(lengths, idx, 1, 2)
    assert sorted(a.tolist() + b.tolist()) == idx.tolist() and abs(len(a) - len(b)) <= 1
    torch.manual_seed(0)
    one = PolicyModel(policy_shape(c))
    two = PolicyModel(policy_shape(c))
    two.load_state_dict(one.state_dict())
    want = behaviour_clone(one, trajs, epochs=2, lr=3e-3, batch_rows=8, seed=5)
    got = behaviour_clone(two, trajs, epochs=2, lr=3e-3, batch_rows=8, seed=5, processes=2)
    assert got == pytest.approx(want, rel=1e-4, abs=1e-5)
    for (name, x), y in zip(one.state_dict().items(), two.state_dict().values()):
        assert torch.allclose(x, y, atol=1e-5), name
    with pytest.raises(ValueError, match="processes=0 invalid; allowed: an int >= 1"):
        behaviour_clone(two, trajs, epochs=1, lr=1e-3, batch_rows=8, seed=5, processes=0)


def test_a_data_parallel_worker_ends_without_interpreter_finalization(tmp_path):
    """``python -m experiments.runtime.bc JOB`` trains its rank, then ends by ``os._exit(0)``: the
    C++ destructors of finalization can abort a finished gloo rank (SIGABRT), so an ``atexit``
    hook, which runs only at finalization, never runs. Job: rank 0 of a world of 1."""
    import subprocess
    import sys

    from experiments.runtime.bc import BCData

    c = tiny(tmp_path, "warmstart.demos=4")
    torch.manual_seed(0)
    job, flag = tmp_path / "rank0.pt", tmp_path / "finalized"
    torch.save({"rank": 0, "world": 1, "rendezvous": str(tmp_path / "rendezvous"), "model": PolicyModel(policy_shape(c)),
                "batch": BCData.of(demonstrations(c)), "args": (1, 1e-3, 4, 5, None)}, job)
    code = ("import atexit, pathlib, runpy, sys; atexit.register(pathlib.Path(sys.argv[2]).touch); "
            "sys.argv = sys.argv[:2]; runpy.run_module('experiments.runtime.bc', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code, str(job), str(flag)], cwd=Path(CONFIGS).parent,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not flag.exists()


def test_unbucketed_behaviour_clone_is_one_forward_at_per_minibatch_bitwise(tmp_path):
    """``bucketed=False`` (the two-agent warm start's computation, cache key bc=2) is exactly the
    pre-micro-batch loop: one ``forward_at`` of each minibatch padded to its longest row, rows in
    the permutation's order (bitwise equal losses and weights), and it refuses processes > 1."""
    from experiments.runtime.bc import behaviour_clone

    c = tiny(tmp_path, "warmstart.demos=12", "warmstart.noise=0.5")
    trajs = demonstrations(c)
    torch.manual_seed(0)
    got_model, ref = PolicyModel(policy_shape(c)), PolicyModel(policy_shape(c))
    ref.load_state_dict(got_model.state_dict())
    got = behaviour_clone(got_model, trajs, epochs=2, lr=3e-3, batch_rows=4, seed=7, bucketed=False)
    want = _padded_reference_bc(ref, trajs, epochs=2, lr=3e-3, batch_rows=4, seed=7, logits="forward_at")
    assert got == want
    assert all(torch.equal(a, b) for a, b in zip(got_model.state_dict().values(), ref.state_dict().values()))
    with pytest.raises(ValueError, match="bucketed=False with processes=2 invalid; allowed: processes=1"):
        behaviour_clone(got_model, trajs, epochs=1, lr=1e-3, batch_rows=4, seed=7, processes=2, bucketed=False)


@pytest.mark.parametrize("env_name", ["bugfix", "long_horizon", "long_horizon_v3"])
def test_each_single_agent_env_demonstrator_solves_its_env_at_zero_noise(tmp_path, env_name):
    # the demo agent is looked up by env.name: at mistake rate 0 it is the oracle of that env's id
    c = tiny(tmp_path, f"env={env_name}")
    env = make_env(c)
    wins = [run_episode(env, make_demo_agent(c.env.name, 0.0), seed=i, options={"task_index": i}).infos[-1]["verified"]
            for i in range(5)]
    assert wins == [1] * 5


def test_bc_budget_counts_a_shared_prefix_once():
    """A model whose forward computes the rows' common prefix once (``share_prefix``) has it
    counted once by BC's token budget, as the update's: three rows of 30 ids sharing their first
    20 fit two to a micro-batch under 40 positions (20 + 2 x 10), one each when every row's
    prefix counts (2 x 30 = 60 > 40)."""
    from experiments.runtime.bc import bc_micro_batches

    tokens = torch.cat([torch.full((3, 20), 7), torch.arange(30).view(3, 10)], dim=1)
    lengths, idx = torch.full((3,), 30), torch.arange(3)
    shared = bc_micro_batches(lengths, idx, 40, tokens, share_prefix=True)
    assert sorted(len(p) for p in shared) == [1, 2] and sorted(torch.cat(shared).tolist()) == [0, 1, 2]
    assert [len(p) for p in bc_micro_batches(lengths, idx, 40, tokens, share_prefix=False)] == [1, 1, 1]
    assert [len(p) for p in bc_micro_batches(lengths, idx, 40)] == [1, 1, 1]
