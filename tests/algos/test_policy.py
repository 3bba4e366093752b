"""Policy: KV cache == full forward, sampling log-probs, critic variants, parameter counts."""

import pytest
import torch

from algos.policy import (
    PolicyModel,
    PolicyShape,
    ValueModel,
    build_models,
    count_params,
    shift_logprobs,
    shift_values,
)

torch.set_num_threads(1)


def _model(critic="none", seed=0):
    torch.manual_seed(seed)
    return PolicyModel(PolicyShape(vocab_size=50, d_model=32, n_layers=2, n_heads=4, max_len=40, critic=critic)).eval()


def test_kv_cache_logits_equal_full_forward_with_ragged_chunks():
    """Rows fed in chunks of different sizes per step (prefill + 1-token decode mixed, some rows
    idle with n=0) give the same logits as one full forward over each row."""
    model = _model()
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, 50, (n,), generator=g) for n in (20, 13, 30)]
    chunks = [[3, 1, 5, 11], [2, 4, 0, 7], [10, 1, 1, 18]]  # per row, per step; sums = 20, 13, 30
    cache = model.new_cache(3)
    got = [[] for _ in seqs]
    ptr = [0, 0, 0]
    for step in range(4):
        n = torch.tensor([chunks[b][step] for b in range(3)])
        inp = torch.zeros(3, int(n.max()), dtype=torch.long)
        for b in range(3):
            inp[b, : n[b]] = seqs[b][ptr[b]: ptr[b] + n[b]]
        logits = model.step(cache, inp, n)
        for b in range(3):
            got[b].append(logits[b, : n[b]])
            ptr[b] += int(n[b])
    assert cache.lengths.tolist() == [20, 13, 30]
    for b, seq in enumerate(seqs):
        full, _ = model(seq[None])
        torch.testing.assert_close(torch.cat(got[b]), full[0], atol=1e-5, rtol=1e-5)


def test_kv_cache_reset_row_starts_a_new_segment():
    model = _model()
    cache = model.new_cache(2)
    a = torch.tensor([[1, 5, 6, 3], [1, 7, 8, 3]])
    model.step(cache, a, torch.tensor([4, 4]))
    cache.reset_rows([1])  # row 1 starts over at position 0 (a compression)
    b = torch.tensor([[9], [1]])
    last = model.step_last(cache, b, torch.tensor([1, 1]))
    full0, _ = model(torch.tensor([[1, 5, 6, 3, 9]]))
    full1, _ = model(torch.tensor([[1]]))
    torch.testing.assert_close(last[0], full0[0, -1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(last[1], full1[0, -1], atol=1e-5, rtol=1e-5)


def test_cache_refuses_to_exceed_max_len():
    model = _model()
    cache = model.new_cache(1)
    with pytest.raises(ValueError, match="max_len"):
        model.step(cache, torch.zeros(1, 41, dtype=torch.long), torch.tensor([41]))


def test_kv_cache_grows_on_demand_and_gives_the_full_size_cache_logits():
    """A cache that starts at 4 positions grows (at least doubling, at most max_len + 1 = 41) and
    gives bitwise the logits of a cache allocated at full size, written entries kept."""
    model = _model()
    g = torch.Generator().manual_seed(2)
    small, full = model.new_cache(2, initial=4), model.new_cache(2, initial=41)
    # row ends after each step: (3, 2) -> (6, 2) -> (26, 9) -> (40, 9)
    # capacity: 4 (fits) -> max(6, 8) = 8 -> max(26, 16) = 26 -> min(41, max(40, 52)) = 41
    expected_capacity = [4, 8, 26, 41]
    for step, n in enumerate(([3, 2], [3, 0], [20, 7], [14, 0])):
        n = torch.tensor(n)
        inp = torch.randint(0, 50, (2, int(n.max())), generator=g)
        a, b = model.step(small, inp, n), model.step(full, inp, n)
        for r in range(2):
            assert torch.equal(a[r, : n[r]], b[r, : n[r]])
        assert small.capacity == expected_capacity[step] and small.k[0].shape[2] == small.capacity
    assert full.capacity == 41 and torch.equal(small.lengths, full.lengths)
    for layer in range(2):
        assert torch.equal(small.k[layer][0, :, :40], full.k[layer][0, :, :40])
        assert torch.equal(small.v[layer][1, :, :9], full.v[layer][1, :, :9])
    with pytest.raises(ValueError, match="max_len"):
        small.reserve(42)


def test_a_new_cache_starts_small():
    # algos.kv_cache.KV_INITIAL_CAPACITY = 256 positions, or max_len + 1 = 41 when smaller
    assert PolicyModel(PolicyShape(vocab_size=50, d_model=32, n_layers=1, n_heads=4, max_len=1024)).new_cache(3).capacity == 256
    assert _model().new_cache(3).capacity == 41


def test_shift_alignment():
    """logp of token t comes from logits at t-1; values of token t are read at t-1."""
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [1 / 3, 1 / 3, 1 / 3]]]))
    tokens = torch.tensor([[0, 1, 2]])
    lp = shift_logprobs(logits, tokens)
    # token 1 under row 0: log 0.25; token 2 under row 1: log 0.1
    torch.testing.assert_close(lp, torch.log(torch.tensor([[1.0, 0.25, 0.1]])))
    torch.testing.assert_close(shift_values(torch.tensor([[0.1, 0.2, 0.3]])), torch.tensor([[0.0, 0.1, 0.2]]))


def test_critic_variants():
    head = _model("head")
    logits, values = head(torch.tensor([[1, 2, 3]]))
    assert logits.shape == (1, 3, 50) and values.shape == (1, 3)
    policy, critic = build_models(PolicyShape(vocab_size=50, d_model=32, n_layers=1, n_heads=2, max_len=16, critic="separate"), seed=0)
    assert policy.value_head is None and isinstance(critic, ValueModel)
    assert critic(torch.tensor([[1, 2]])).shape == (1, 2)
    # detach_value: the value loss reaches only the head
    v = head(torch.tensor([[1, 2, 3]]), detach_value=True)[1].sum()
    v.backward()
    assert head.trunk.blocks[0].qkv.weight.grad is None
    assert head.value_head.bias.grad is not None


def test_count_params_matmul_only():
    m = PolicyModel(PolicyShape(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_len=4, mlp_ratio=4))
    # block: ln1 16 + qkv 8*24+24=216 + proj 64+8=72 + ln2 16 + fc 8*32+32=288 + out 32*8+8=264 = 872
    # ln_f 16; tied LM head / token table 10*8 = 80 (counted once); position table 4*8 left out
    assert count_params(m) == 872 + 16 + 80
    assert count_params(m, matmul_only=False) == 872 + 16 + 80 + 32


def test_packed_step_last_on_a_rows_subset_equals_the_full_forward():
    """The packed cached forward (per-token layers on real tokens only, one-token rows attending
    over the whole cache, multi-token rows over their own rows) gives each row's full-forward
    logits at its last token, over random ragged steps with idle rows and a ``rows`` subset given
    out of order; the cache lengths count every appended token."""
    model = _model()
    g = torch.Generator().manual_seed(4)
    cache = model.new_cache(5)
    seen = [[] for _ in range(5)]
    for step in range(6):
        n = torch.randint(0, 5, (5,), generator=g)
        n[step % 5] = 1  # always a one-token row next to the others
        rows = torch.arange(5)
        if step == 3:  # a subset of rows, out of order
            rows, n = torch.tensor([4, 1]), torch.tensor([3, 1])
        inp = torch.randint(0, 50, (len(n), int(n.max())), generator=g)
        got = model.step_last(cache, inp, n, rows=None if step != 3 else rows)
        for i, row in enumerate(rows.tolist()):
            seen[row] += inp[i, : n[i]].tolist()
            if n[i] > 0:
                full, _ = model(torch.tensor([seen[row]]))
                torch.testing.assert_close(got[i], full[0, -1], atol=1e-5, rtol=1e-5)
        assert cache.lengths.tolist() == [len(s) for s in seen]


def test_logits_at_wanted_tokens_equal_the_full_forward():
    """``forward_at`` + ``token_logprobs`` (logits only before the wanted tokens) give the full
    forward's ``shift_logprobs_entropy`` there and 0 elsewhere; values are the full ones."""
    from algos.policy import shift_logprobs_entropy, token_logprobs

    model = _model(critic="head")
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 50, (3, 17), generator=g)
    want = torch.rand(3, 17, generator=g) > 0.6
    want[:, 0] = False
    logits, values = model(tokens)
    full_lp, full_ent = shift_logprobs_entropy(logits, tokens, 0.7)
    sel, sel_values = model.forward_at(tokens, want)
    assert sel.shape == (int(want.sum()), 50)
    lp, ent = token_logprobs(sel, tokens, want, 0.7, entropy=True)
    torch.testing.assert_close(lp[want], full_lp[want], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent[want], full_ent[want], atol=1e-5, rtol=1e-5)
    assert (lp[~want] == 0).all() and (ent[~want] == 0).all()
    torch.testing.assert_close(sel_values, values)
    # gradients flow to the policy through the selected log-probs only
    lp.sum().backward()
    assert model.lm_head.weight.grad is not None
    with pytest.raises(ValueError, match="want"):
        model.forward_at(tokens, torch.ones_like(want))


def test_inverse_cdf_sampling_matches_the_distribution():
    """``sample_categorical``: frequencies over 40 000 draws within 4 binomial standard errors of
    p = softmax([0, ln 2, ln 5, -inf]) = [1/8, 2/8, 5/8, 0]; a zero-probability token is never
    drawn; the same generator seed gives the same draws."""
    from algos.policy import sample_categorical

    logp = torch.log(torch.tensor([[1.0, 2.0, 5.0, 0.0]]) / 8).expand(40_000, 4)
    draws = sample_categorical(logp, torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=4).double() / 40_000
    p = torch.tensor([1 / 8, 2 / 8, 5 / 8, 0.0], dtype=torch.float64)
    se = (p * (1 - p) / 40_000).sqrt()  # e.g. 1/8: sqrt(0.125 * 0.875 / 40000) = 0.00165
    assert ((freq - p).abs() <= 4 * se + 1e-12).all(), freq
    assert freq[3] == 0
    assert torch.equal(draws, sample_categorical(logp, torch.Generator().manual_seed(0)))


def test_trunk_keep_equals_the_full_forward_at_the_kept_positions():
    """``Trunk(tokens, keep)`` (last block only at the kept positions) equals the full forward
    there, gradients included; ``ValueModel(tokens, at)`` likewise with 0 elsewhere."""
    torch.manual_seed(0)
    shape = PolicyShape(vocab_size=50, d_model=32, n_layers=2, n_heads=4, max_len=40)
    critic = ValueModel(shape)
    nn_init = torch.Generator().manual_seed(5)
    with torch.no_grad():
        critic.head.weight.normal_(generator=nn_init)
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 50, (4, 23), generator=g)
    keep = torch.rand(4, 23, generator=g) > 0.7
    keep[2] = False  # a row with nothing kept
    keep[0, 0] = keep[3, 22] = True
    full = critic.trunk(tokens)
    part = critic.trunk(tokens, keep=keep)
    torch.testing.assert_close(part, full[keep], atol=1e-5, rtol=1e-5)
    w = torch.randn(part.shape, generator=g)
    (ga,) = torch.autograd.grad((part * w).sum(), critic.trunk.blocks[0].qkv.weight)
    (gb,) = torch.autograd.grad((full[keep] * w).sum(), critic.trunk.blocks[0].qkv.weight)
    torch.testing.assert_close(ga, gb, atol=1e-5, rtol=1e-4)
    vals = critic(tokens, at=keep)
    torch.testing.assert_close(vals[keep], critic(tokens)[keep], atol=1e-5, rtol=1e-5)
    assert (vals[~keep] == 0).all()


def test_a_separate_critic_takes_its_own_width_and_depth():
    shape = PolicyShape(vocab_size=50, d_model=32, n_layers=2, n_heads=4, max_len=40, critic="separate",
                        critic_d_model=16, critic_n_layers=1)
    critic = ValueModel(shape)
    assert (critic.shape.d_model, critic.shape.n_layers, len(critic.trunk.blocks)) == (16, 1, 1)
    # parameters of the 16-wide one-block trunk: tok 50*16 + pos 40*16 + ln 2*16*2 + qkv 16*48+48
    # + proj 16*16+16 + fc 16*64+64 + out 64*16+16 + ln_f 2*16 = 800+640+64+816+272+1088+1040+32 = 4752,
    # plus the head 16+1 = 4769
    assert sum(p.numel() for p in critic.parameters()) == 4769
    assert ValueModel(PolicyShape(vocab_size=50, d_model=32, n_layers=2, n_heads=4, max_len=40)).shape.d_model == 32
    with pytest.raises(ValueError, match="policy.critic_d_model=18 must be >= 1 and divisible by policy.n_heads=4"):
        PolicyShape(vocab_size=50, d_model=32, n_heads=4, critic_d_model=18)
