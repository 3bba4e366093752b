"""The Hugging Face policy (``algos.hf_backend``) on a tiny model built offline
(``experiments.runtime.hf_tiny``), on CPU float32: token in, token out through the rollout engine on BugFix,
and across a compression on LongHorizon-v3."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers")

import envs  # noqa: E402
from algos.hf_backend import ChatLayout, load_policy  # noqa: E402
from algos.registry import make_trainer  # noqa: E402
from algos.requests import RolloutRequest, make_requests  # noqa: E402
from algos.rollout import RolloutEngine  # noqa: E402
from envs.episode import run_episode  # noqa: E402
from envs.long_horizon_v3_agents import make_agent as make_lh3_agent  # noqa: E402
from experiments.runtime.schema import AlgoConfig  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(hf_model_dir):
    return hf_model_dir


@pytest.fixture(scope="module")
def rollout(model_dir):
    """A few BugFix episodes (one env slot, so the env's log is in request order) with every
    reset observation, action text and step observation the env handled."""
    backend = load_policy(model_dir, device="cpu", dtype="float32")
    eng = RolloutEngine(envs.BUGFIX_ID, num_envs=1, max_len=1024, max_action_tokens=12)
    env = eng.envs[0]
    log: list[tuple[str, str]] = []
    reset, step = env.reset, env.step

    def recording_reset(**kw):
        obs, info = reset(**kw)
        log.append(("reset", obs))
        return obs, info

    def recording_step(action):
        out = step(action)
        log.extend([("action", action), ("obs", out[0])])
        return out
    env.reset, env.step = recording_reset, recording_step
    trajs = eng.collect(backend, make_requests(2, 2, seed=3, task_indices=[0, 1]),
                        generator=torch.Generator().manual_seed(0))
    eng.close()
    return backend, trajs, log


def test_import_algos_and_the_runtime_does_not_import_transformers():
    """transformers loads only when a Hugging Face policy is built: a tiny-policy run never pays for it."""
    code = ("import sys, algos, algos.backend, algos.requests, algos.recording, algos.rollout, algos.evaluation, algos.trainer, "
            "algos.hf_backend, experiments.runtime.build, experiments.runtime.config, experiments.runtime.loop; "
            "print('transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_behavior_logprobs_equal_a_teacher_forced_forward(rollout):
    backend, trajs, _ = rollout
    lm = backend.module.lm
    assert sum(t.turns for t in trajs) >= 4
    for t in trajs:
        for s in t.segments:
            ids = torch.tensor([s.tokens])
            with torch.no_grad():
                lp = torch.log_softmax(lm(input_ids=ids).logits[0].float() / t.temperature, -1)
            for i, (m, b) in enumerate(zip(s.action_mask, s.behavior_logp)):
                if m:
                    assert abs(float(lp[i - 1, s.tokens[i]]) - b) <= 1e-5


def _episodes(log):
    eps = []
    for kind, text in log:
        if kind == "reset":
            eps.append({"reset": text, "actions": [], "obs": []})
        else:
            eps[-1]["actions" if kind == "action" else "obs"].append(text)
    return eps


def test_only_sampled_ids_carry_loss_weight(rollout):
    """Each segment is exactly first(obs_0) a_1 next(obs_1) a_2 ... with action_mask 1 on the
    sampled ids a_k and 0 on every template / observation id."""
    backend, trajs, log = rollout
    layout = backend.layout
    for t, ep in zip(trajs, _episodes(log)):
        (s,) = t.segments
        tokens, mask = list(layout.first(ep["reset"], 1024 - 14)[0]), []
        mask = [0] * len(tokens)
        for k, turn in enumerate(s.turns):
            sampled = s.tokens[turn.start: turn.end + 1]
            tokens += sampled
            mask += [1] * len(sampled)
            if turn.capped:
                tokens += layout.capped_close
                mask += [0] * len(layout.capped_close)
            last = k == len(s.turns) - 1
            if not last or s.end == "truncated":
                nxt = layout.next(ep["obs"][k], 1024 - len(tokens)) if last else layout.next(ep["obs"][k])
                tokens += nxt
                mask += [0] * len(nxt)
        assert s.tokens == tokens and s.action_mask == mask


def test_decoding_the_sampled_ids_gives_the_env_text(rollout):
    backend, trajs, log = rollout
    for t, ep in zip(trajs, _episodes(log)):
        texts = [backend.layout.action_text(s.tokens[turn.start: turn.end + 1], turn.capped)
                 for s in t.segments for turn in s.turns]
        assert texts == ep["actions"]


def test_later_observation_is_the_template_suffix(model_dir):
    backend = load_policy(model_dir, device="cpu", dtype="float32")
    layout = backend.layout
    conv = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "run_tests"}]
    full = layout.ids([*conv, {"role": "user", "content": "tests : 1 of 3 pass"}], True)
    prompt = layout.ids(conv[:1], True)
    action = full[len(prompt): full.index(layout.end_id, len(prompt)) + 1]
    assert prompt + action + layout.next("tests : 1 of 3 pass") == full


def test_template_that_rewrites_earlier_turns_is_rejected(model_dir):
    backend = load_policy(model_dir, device="cpu", dtype="float32")
    tok = copy.deepcopy(backend.layout.tok)
    # earlier assistant turns are shown as "[earlier]": the rendering changes when a turn is added
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['role'] == 'assistant' and not loop.last %}[earlier]{% else %}{{ m['content'] }}{% endif %}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    with pytest.raises(ValueError, match="not prefix-preserving"):
        ChatLayout(tok)


def test_template_without_end_of_turn_token_is_rejected(model_dir):
    backend = load_policy(model_dir, device="cpu", dtype="float32")
    tok = copy.deepcopy(backend.layout.tok)
    tok.chat_template = ("{% for m in messages %}{{ m['role'] }}:\n{{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}assistant:\n{% endif %}")
    with pytest.raises(ValueError, match="end-of-turn"):
        ChatLayout(tok)


def test_grpo_and_ppo_update_on_hf_trajectories(rollout, model_dir):
    _, trajs, _ = rollout
    for name, head in (("grpo", False), ("ppo", True)):
        backend = load_policy(model_dir, device="cpu", dtype="float32", value_head=head)
        trajs = copy.deepcopy(trajs)
        for i, t in enumerate(trajs):
            t.train_reward = float(i % 2)
            t.segments[-1].turns[-1].reward = float(i % 2)
        before = [p.detach().clone() for p in backend.module.parameters()]
        tr = make_trainer(name, AlgoConfig(name=name, epochs=1), backend.module)
        m = tr.update(trajs)
        assert m["train/behavior_old_logp_gap_max"] <= 1e-5
        assert any(not torch.equal(a, p) for a, p in zip(before, backend.module.parameters()))
        assert tr.meter.state_dict()["train_flops"] > 0


LH3 = "agentrl/LongHorizon-v3"
COMPRESS_EVERY_2 = {"strategy": "structured_summary", "trigger": "turns", "every_turns": 2}


@pytest.fixture(scope="module")
def compressed_rollout(model_dir):
    """Two LongHorizon-v3 episodes (4 stages) compressed every 2 turns, whose actions are the
    oracle's, fed as forced ids (recorded with the model's log-probs like sampled ones)."""
    policy = load_policy(model_dir, device="cpu", dtype="float32")
    env = envs.make(LH3, compression=COMPRESS_EVERY_2, n_stages=4)
    reqs, actions = [], []
    for k in range(2):
        options = {"task_index": k, "split": "train"}
        ep = run_episode(env, make_lh3_agent("oracle"), seed=k, options=options)
        actions.append(ep.actions)
        forced = tuple(i for a in ep.actions for i in policy.layout.action_ids(a))
        reqs.append(RolloutRequest(options=options, seed=k, group_id=k, forced=forced))
    env.close()
    eng = RolloutEngine(LH3, num_envs=2, max_len=1024, max_action_tokens=12, env_kwargs={"n_stages": 4},
                        compression=COMPRESS_EVERY_2)
    trajs = eng.collect(policy, reqs, generator=torch.Generator().manual_seed(0))
    eng.close()
    return policy, trajs, actions


def test_logprobs_mask_and_text_hold_across_a_compression(compressed_rollout):
    """Every segment (the reset one and those a compression opened): behaviour log-probs equal a
    fresh teacher-forced forward over the segment's ids (<= 1e-5); loss weight exactly on each
    action's ids; the decoded ids are the text the env received (the oracle's, so it succeeds)."""
    policy, trajs, actions = compressed_rollout
    lm = policy.module.causal
    for t, acts in zip(trajs, actions):
        assert t.verified == 1 and t.turns == len(acts)
        assert len(t.segments) >= 3 and [s.start for s in t.segments[1:]] == ["compression"] * (len(t.segments) - 1)
        sent = []
        for s in t.segments:
            with torch.no_grad():
                lp = torch.log_softmax(lm(input_ids=torch.tensor([s.tokens])).logits[0].float() / t.temperature, -1)
            action_positions = set()
            for turn in s.turns:
                ids = s.tokens[turn.start: turn.end + 1]
                sent.append(policy.layout.action_text(ids, turn.capped))
                assert ids == policy.layout.action_ids(sent[-1])
                action_positions.update(range(turn.start, turn.end + 1))
            assert [i for i, m in enumerate(s.action_mask) if m] == sorted(action_positions)
            for i in sorted(action_positions):
                assert abs(float(lp[i - 1, s.tokens[i]]) - s.behavior_logp[i]) <= 1e-5
        assert sent == acts


def test_continuous_batching_keeps_behavior_logprobs_exact(model_dir):
    """Six BugFix episodes through three slots (rows reset and refilled while others decode, so
    the batched cache holds holes): every sampled id's log-prob equals a fresh forward."""
    policy = load_policy(model_dir, device="cpu", dtype="float32")
    eng = RolloutEngine(envs.BUGFIX_ID, num_envs=3, max_len=1024, max_action_tokens=12)
    trajs = eng.collect(policy, make_requests(3, 2, seed=5, task_indices=[0, 1, 2]),
                        generator=torch.Generator().manual_seed(1))
    eng.close()
    for t in trajs:
        for s in t.segments:
            with torch.no_grad():
                lp = torch.log_softmax(policy.causal(input_ids=torch.tensor([s.tokens])).logits[0].float(), -1)
            for i, m in enumerate(s.action_mask):
                if m:
                    assert abs(float(lp[i - 1, s.tokens[i]]) - s.behavior_logp[i]) <= 1e-5


def test_compacting_the_cache_leaves_the_logits_unchanged(model_dir):
    """Rows fed ragged ids (holes in the batched cache); one copy compacted midway gives the
    same next-id logits as the uncompacted one."""
    policy = load_policy(model_dir, device="cpu", dtype="float32")
    gen = torch.Generator().manual_seed(0)
    caches = [policy.new_cache(3), policy.new_cache(3)]
    for step, n in enumerate([[5, 0, 2], [1, 3, 1], [0, 1, 4], [2, 2, 0], [1, 1, 1]]):
        tokens = torch.randint(5, 200, (3, max(n)), generator=gen)
        if step == 2:
            caches[1].compact()
            assert caches[1].valid.shape[1] == int(caches[1].valid.sum(1).max()) < caches[0].valid.shape[1]
        out = [policy.step_last(c, tokens, torch.tensor(n)) for c in caches]
        assert torch.allclose(out[0], out[1], atol=1e-5)


def test_the_sampling_cache_stays_within_its_compaction_width(model_dir):
    """Two rows taking turns to be fed 40 ids while the other samples one id leave holes in the
    shared column layout; after every step the cache is at most ``compact_width`` of its longest row wide
    (longest + longest // 4 + 64: 640 -> 864), so a run's cache is bounded by rows x
    ``compact_width(max_len)`` between steps, and it did compact."""
    from algos.hf_backend import compact_width

    assert compact_width(640) == 640 + 160 + 64 == 864
    policy = load_policy(model_dir, device="cpu", dtype="float32")
    policy.share_prefix = False
    cache = policy.new_cache(2)
    gen = torch.Generator().manual_seed(0)
    widths = []
    for step in range(12):
        tokens = torch.randint(5, 200, (2, 40), generator=gen)
        policy.step_last(cache, tokens, torch.tensor([1, 40] if step % 2 else [40, 1]))
        longest = int(cache.valid.sum(1).max())
        widths.append(cache.valid.shape[1])
        assert cache.valid.shape[1] <= compact_width(longest), (widths, longest)
    # 12 steps of 40 columns: 480 columns appended; each row holds 6 x 40 + 6 x 1 = 246 ids
    assert cache.lengths.tolist() == [246, 246]
    assert any(b < a for a, b in zip(widths, widths[1:]))  # compacted at least once


def test_shared_prefix_sampling_equals_the_unshared_path(model_dir):
    """Rows that begin alike (the system prompt, a group's first observation) get the common
    prefix's keys and values computed once: through the rollout engine (groups of 2 in 2 slots,
    then the rows refilled while the cache holds the prefix) the sampled ids equal the unshared
    path's for the same seed and the log-probs agree within 1e-5; the prefix really was shared."""
    system = "You fix bugs. Read the files, run the tests, then submit a fix. " * 3
    runs = {}
    for share in (True, False):
        policy = load_policy(model_dir, device="cpu", dtype="float32", system=system)
        policy.share_prefix = share
        caches = []
        new_cache = policy.new_cache
        policy.new_cache = lambda rows: caches.append(new_cache(rows)) or caches[-1]
        eng = RolloutEngine(envs.BUGFIX_ID, num_envs=2, max_len=1024, max_action_tokens=12)
        runs[share] = eng.collect(policy, make_requests(2, 2, seed=7, task_indices=[0, 1]),
                                  generator=torch.Generator().manual_seed(2))
        eng.close()
        assert all((c.prefix_ids is not None) == share for c in caches)
        if share:
            assert len(caches[0].prefix_ids) >= 16
    for a, b in zip(runs[True], runs[False]):
        for sa, sb in zip(a.segments, b.segments):
            assert sa.tokens == sb.tokens
            assert max(abs(x - y) for x, y in zip(sa.behavior_logp, sb.behavior_logp)) <= 1e-5


def test_common_prefix_length_leaves_each_row_an_id():
    from algos.batch import common_prefix_length

    t = torch.tensor([[1, 2, 3, 4, 5], [1, 2, 3, 9, 9], [1, 2, 3, 4, 7]])
    assert common_prefix_length(t, torch.tensor([5, 5, 5])) == 3  # rows differ at column 3
    assert common_prefix_length(t[[0, 2]], torch.tensor([5, 5])) == 4  # differ at column 4
    assert common_prefix_length(t[[0, 0]], torch.tensor([5, 3])) == 2  # n = 3 leaves 2 shared + 1 own
    assert common_prefix_length(t, torch.tensor([1, 5, 5])) == 0


def _system_prompt_batch(model_dir):
    """A policy with a 3-sentence system prompt and the collated batch of 4 BugFix rollouts it
    sampled (2 tasks x 2): rows that begin with the same prompt ids."""
    from algos.batch import collate

    system = "You fix bugs. Read the files, run the tests, then submit a fix. " * 3
    policy = load_policy(model_dir, device="cpu", dtype="float32", system=system)
    eng = RolloutEngine(envs.BUGFIX_ID, num_envs=4, max_len=1024, max_action_tokens=12)
    trajs = eng.collect(policy, make_requests(2, 2, seed=3, task_indices=[0, 1]), generator=torch.Generator().manual_seed(0))
    eng.close()
    return policy, collate(trajs)


def test_shared_prefix_training_forward_equals_the_unshared_gradients(model_dir):
    """The training forward computes the ids all rows begin with once (``HFPolicy._hidden``): on
    rollouts with a common system prompt the log-probs of the sampled ids and every parameter's
    gradient of their sum (one SGD step's direction) equal the unshared forward's within float
    tolerance; and the trainer's token budget charges the prefix once per slice (more rows fit)."""
    from algos.batch import common_prefix_length, row_lengths
    from algos.policy import token_logprobs

    policy, batch = _system_prompt_batch(model_dir)
    assert common_prefix_length(batch.tokens, row_lengths(batch)) >= 16
    want = batch.action_mask > 0
    out = {}
    for share in (True, False):
        policy.share_prefix = share
        policy.zero_grad(set_to_none=True)
        logits, _ = policy.forward_at(batch.tokens, want)
        lp = token_logprobs(logits, batch.tokens, want)[0]
        lp.sum().backward()
        out[share] = (lp.detach(), {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None})
    torch.testing.assert_close(out[True][0], out[False][0], atol=1e-5, rtol=1e-5)
    assert out[True][1].keys() == out[False][1].keys() and out[True][1]
    for name, g in out[True][1].items():
        torch.testing.assert_close(g, out[False][1][name], atol=1e-5, rtol=1e-4, msg=name)

    policy.share_prefix = True
    trainer = make_trainer("grpo", AlgoConfig(name="grpo", micro_batch_rows=64), policy)
    lengths = row_lengths(batch)
    p = common_prefix_length(batch.tokens, lengths)
    trainer.micro_batch_tokens = int(p + 2 * (lengths.max() - p))  # two rows' own ids fit, the prefix once
    assert max(len(s) for s in trainer._buckets(batch.tokens, lengths, 64)) >= 2
    policy.share_prefix = False  # the same budget without sharing: every row's prefix counts
    assert max(len(s) for s in trainer._buckets(batch.tokens, lengths, 64)) == 1


def test_shared_prefix_forward_is_charged_once_in_the_flop_counter(model_dir):
    """A prefix-sharing forward of R rows (T real ids in all, shared prefix p) runs the trunk's
    N - H parameters on T - (R - 1) p ids and the heads' H on all T, and the prefix's attention
    once, so it costs 2 (N - H)(R - 1) p + 2 L d (R - 1) p (p + 1) FLOPs less than the unshared
    forward (forward_flops = 2 N T + A, attention_flops with and without ``prefix``)."""
    from algos.batch import row_lengths, shared_prefix_length

    policy, batch = _system_prompt_batch(model_dir)
    rows = torch.arange(batch.num_rows)
    flops = {}
    for share in (True, False):
        policy.share_prefix = share
        trainer = make_trainer("grpo", AlgoConfig(name="grpo"), policy)
        trainer._count(batch, rows, train=False)
        flops[share] = trainer.meter.train_flops
    r, p = batch.num_rows, shared_prefix_length(batch.tokens)
    assert r == 4 and p >= 16
    n, h = policy.n_params(), policy.head_params()
    assert h == policy.causal.get_output_embeddings().weight.numel() and 0 < h < n
    layers, d = policy.shape.n_layers, policy.shape.d_model
    saved = 2 * (n - h) * (r - 1) * p + 2 * layers * d * (r - 1) * p * (p + 1)
    assert flops[False] - flops[True] == pytest.approx(saved, rel=1e-12)
    # unshared: exactly 2 N T + A over the rows' real ids
    lengths = row_lengths(batch)
    from algos.compute import attention_flops
    assert flops[False] == pytest.approx(2 * n * int(lengths.sum()) + attention_flops(layers, d, lengths), rel=1e-12)
