"""The Hugging Face backend (``algos.hf_backend``) on a tiny model built offline
(``algos.hf_tiny``), on CPU float32: token in, token out through the rollout engine on BugFix."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers")

import envs  # noqa: E402
from algos.hf_backend import ChatLayout, HFBackend  # noqa: E402
from algos.hf_tiny import TinyModelSpec, build_tiny_model_dir  # noqa: E402
from algos.registry import make_trainer  # noqa: E402
from algos.rollout import RolloutEngine, make_requests  # noqa: E402
from experiments.runtime.schema import AlgoConfig  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model_dir(tmp_path_factory.mktemp("hf_tiny"), TinyModelSpec(episodes=6))


@pytest.fixture(scope="module")
def rollout(model_dir):
    """A few BugFix episodes (one env slot, so the env's log is in request order) with every
    reset observation, action text and step observation the env handled."""
    backend = HFBackend(model_dir, device="cpu", dtype="float32")
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


def test_import_algos_does_not_import_transformers():
    code = "import sys, algos, algos.backend, algos.rollout, algos.trainer; print('transformers' in sys.modules)"
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
    backend = HFBackend(model_dir, device="cpu", dtype="float32")
    layout = backend.layout
    conv = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "run_tests"}]
    full = layout.ids([*conv, {"role": "user", "content": "tests : 1 of 3 pass"}], True)
    prompt = layout.ids(conv[:1], True)
    action = full[len(prompt): full.index(layout.end_id, len(prompt)) + 1]
    assert prompt + action + layout.next("tests : 1 of 3 pass") == full


def test_template_that_rewrites_earlier_turns_is_rejected(model_dir):
    backend = HFBackend(model_dir, device="cpu", dtype="float32")
    tok = copy.deepcopy(backend.tokenizer)
    # earlier assistant turns are shown as "[earlier]": the rendering changes when a turn is added
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['role'] == 'assistant' and not loop.last %}[earlier]{% else %}{{ m['content'] }}{% endif %}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    with pytest.raises(ValueError, match="not prefix-preserving"):
        ChatLayout(tok)


def test_template_without_end_of_turn_token_is_rejected(model_dir):
    backend = HFBackend(model_dir, device="cpu", dtype="float32")
    tok = copy.deepcopy(backend.tokenizer)
    tok.chat_template = ("{% for m in messages %}{{ m['role'] }}:\n{{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}assistant:\n{% endif %}")
    with pytest.raises(ValueError, match="end-of-turn"):
        ChatLayout(tok)


def test_grpo_and_ppo_update_on_hf_trajectories(rollout, model_dir):
    _, trajs, _ = rollout
    for name, head in (("grpo", False), ("ppo", True)):
        backend = HFBackend(model_dir, device="cpu", dtype="float32", value_head=head)
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
