"""experiments/runfiles/transcripts.py: rendering (sampled vs environment tokens), the deterministic choice of
one success and one failure, transcripts.json, the W&B payloads, and the report's section."""

from __future__ import annotations

import json

import pytest

from algos.batch import Segment, Trajectory, Turn
from envs.tokenizer import get_tokenizer
from experiments.runfiles import transcripts as T

TOK = get_tokenizer()


def _env(seg: Segment, ids: list[int]) -> None:
    seg.tokens += ids
    seg.action_mask += [0] * len(ids)


def _sampled(seg: Segment, ids: list[int]) -> None:
    seg.tokens += ids
    seg.action_mask += [1] * len(ids)


def hand_trajectory(verified: int = 1, index: int = 0) -> Trajectory:
    """Segment 1 (reset -> compressed): [BOS] turns left : 3 [SEP] «run tests [EOS]» ok [SEP]
    «done» (cut at the cap: env-written EOS); segment 2 (compression -> terminated):
    [BOS] ok [SEP] «run tests [EOS]»."""
    bos, sep, eos = TOK.bos_id, TOK.sep_id, TOK.eos_id
    s1 = Segment(start="reset", end="compressed")
    _env(s1, [bos, *TOK.encode("turns left : 3"), sep])
    start = len(s1.tokens)
    _sampled(s1, [*TOK.encode("run tests"), eos])
    s1.turns.append(Turn(start=start, end=len(s1.tokens) - 1, reward=0.0, tool_status="ok"))
    _env(s1, [*TOK.encode("ok"), sep])
    start = len(s1.tokens)
    _sampled(s1, TOK.encode("done"))
    s1.turns.append(Turn(start=start, end=len(s1.tokens) - 1, reward=0.5, tool_status="timeout", capped=True))
    _env(s1, [eos])
    s2 = Segment(start="compression", end="terminated")
    _env(s2, [bos, *TOK.encode("ok"), sep])
    start = len(s2.tokens)
    _sampled(s2, [*TOK.encode("run tests"), eos])
    s2.turns.append(Turn(start=start, end=len(s2.tokens) - 1, reward=1.0, tool_status="ok"))
    return Trajectory(task_id="heldout/7", index=index, seed=11, segments=[s1, s2], stop_reason="submitted_resolved",
                      terminated=True, verified=verified, train_reward=1.5, turns=3)


# sampled tokens: (run, tests, EOS) + (done) + (run, tests, EOS) = 3 + 1 + 3 = 7
EXPECTED = """task heldout/7 | seed 11 | stop reason: submitted_resolved | verifier: pass | train reward 1.5 | turns 3 | sampled tokens 7
--- segment 1: start reset, end compressed ---
turns left : 3
«run tests»
[turn 1: tool ok, reward 0]
ok
«done»
[turn 2: tool timeout, reward 0.5, cut at the length cap]
--- segment 2: start compression, end terminated ---
ok
«run tests»
[turn 3: tool ok, reward 1]
"""


def test_render_tells_sampled_from_environment_tokens():
    assert T.render(hand_trajectory()) == EXPECTED
    kinds = [(k, TOK.decode(ids), turn) for k, ids, turn in T.segment_parts(hand_trajectory().segments[0])]
    assert kinds == [("env", "turns left : 3", None), ("sampled", "run tests", 0), ("env", "ok", None),
                     ("sampled", "done", 1), ("env", "", None)]
    failed = hand_trajectory(verified=0)
    assert "| verifier: fail |" in T.render(failed)
    failed.masked, failed.verified = True, None
    assert "| verifier: masked (not scored) |" in T.render(failed)


def test_render_of_a_real_scripted_episode():
    import envs
    from algos.recording import demo_to_trajectory
    from envs.bugfix.agents import make_agent
    from experiments.runtime.warmstart import play_demo

    env = envs.make(envs.BUGFIX_ID)
    observations, actions, rewards, infos, terminated, truncated = play_demo(
        env, make_agent("oracle"), 3, {"task_index": 0, "split": "heldout"})
    env.close()
    traj = demo_to_trajectory(observations, actions, rewards, infos, terminated, truncated, max_len=4096,
                              max_action_tokens=64)
    text = T.render(traj)
    assert f"stop reason: {traj.stop_reason}" in text.splitlines()[0]
    assert "| verifier: pass |" in text.splitlines()[0] and traj.verified == 1
    sampled = [line[1:-1] for line in text.splitlines() if line.startswith("«")]
    assert sampled == [TOK.decode(TOK.encode(a)) for a in actions]  # every action, in order, and nothing else
    assert TOK.decode(TOK.encode(observations[0])) in text  # the first observation, plain


def test_choose_is_deterministic_and_skips_masked():
    masked = hand_trajectory(verified=1, index=0)
    masked.masked, masked.verified = True, None
    trajs = [hand_trajectory(0, index=4), masked, hand_trajectory(1, index=3), hand_trajectory(0, index=2),
             hand_trajectory(1, index=1)]
    chosen = T.choose(trajs)
    assert [(o, t.index) for o, t in chosen] == [("success", 1), ("failure", 2)]
    assert [(o, t.index) for o, t in T.choose(trajs, per_method=2)] == [
        ("success", 1), ("success", 3), ("failure", 2), ("failure", 4)]
    assert [o for o, _ in T.choose([hand_trajectory(1), hand_trajectory(1, index=1)])] == ["success"]  # no failure
    with pytest.raises(ValueError, match="per_method=0 invalid; allowed: an int >= 1"):
        T.choose(trajs, per_method=0)


def test_save_and_load_transcripts(tmp_path):
    path = T.save_transcripts(tmp_path, [hand_trajectory(0, index=1), hand_trajectory(1, index=2)])
    assert path == tmp_path / "transcripts.json"
    data = json.loads(path.read_text())["transcripts"]
    assert [r["outcome"] for r in data] == ["success", "failure"]
    assert data[0]["text"] == EXPECTED and data[0]["stop_reason"] == "submitted_resolved"
    assert data[1]["verified"] == 0 and data[1]["index"] == 1
    assert [p["kind"] for p in data[0]["parts"]][:4] == ["segment", "env", "sampled", "note"]
    assert T.load_transcripts(tmp_path) == data
    assert T.load_transcripts(tmp_path / "nothing") == []


def test_wandb_payloads_offline():
    import wandb

    recs = [T.record(hand_trajectory(1), "success"), T.record(hand_trajectory(0), "failure")]
    table = T.wandb_transcripts(recs, method="ppo")
    assert isinstance(table, wandb.Table) and table.columns == list(T.TABLE_COLUMNS)
    assert [row[:5] for row in table.data] == [["ppo", "success", "heldout/7", "submitted_resolved", 1],
                                               ["ppo", "failure", "heldout/7", "submitted_resolved", 0]]
    assert table.data[0][-1] == EXPECTED
    page = T.wandb_transcripts(recs, method="ppo", as_html=True)
    assert isinstance(page, wandb.Html)
    assert "<b style='color:#1f4fd1'>«run tests»</b>" in page.html and page.html.count("<pre") == 2


def test_report_shows_one_success_and_one_failure_per_method(tmp_path):
    from experiments.report import render_report
    from report_fixtures import write_run

    for algo in ("grpo", "ppo"):
        for seed in (0, 1):
            run_dir = write_run(tmp_path / f"{algo}{seed}", algo, "bugfix", seed)
            # seed 0 has only failures, seed 1 a success and a failure: the report takes the
            # failure of seed 0 and the success of seed 1
            trajs = [hand_trajectory(0, index=0)] + ([hand_trajectory(1, index=1)] if seed else [])
            T.save_transcripts(run_dir, trajs)
    rep = render_report(tmp_path, references=False)
    for algo in ("grpo", "ppo"):
        recs = rep.transcripts["bugfix"][algo]
        assert [(r["outcome"], r["seed_of_run"]) for r in recs] == [("success", 1), ("failure", 0)]
    md = rep.markdown
    section = md[md.index("### What the agent did"):]
    assert section.count("**success** (run seed 1):") == 2 and section.count("**failure** (run seed 0):") == 2
    assert "«run tests»" in section and "stop reason: submitted_resolved | verifier: fail" in section


def test_report_tables_for_the_logger(tmp_path):
    from experiments.report import render_report, report_tables
    from report_fixtures import write_run

    for algo in ("grpo", "ppo"):
        for seed in (0, 1):
            T.save_transcripts(write_run(tmp_path / f"{algo}{seed}", algo, "bugfix", seed),
                               [hand_trajectory(0, index=0), hand_trajectory(1, index=1)])
    tables = report_tables(render_report(tmp_path, references=False))
    assert set(tables) == {"report/conclusion", "report/references", "report/transcripts"}
    cols, rows = tables["report/conclusion"]
    assert len(rows) == 4 and cols[-2:] == ["verdict", "smallest difference called"]  # one per compute axis, PPO - GRPO
    cols, rows = tables["report/references"]
    # start model p = 0.2 of 16 x 2 = 32 attempts: Wilson on round(6.4) = 6 of 32, z = 1.96:
    # center = (0.1875 + 3.8416/64) / (1 + 3.8416/32) = 0.22099,
    # half = 1.96/1.12005 * sqrt(0.1875*0.8125/32 + 3.8416/4096) = 0.13209 -> [0.089, 0.353]
    assert rows == [["bugfix", "start model", "start.pt", "0.200", "[0.089, 0.353] (Wilson)", "32"]]
    cols, rows = tables["report/transcripts"]
    assert [r[:3] for r in rows] == [["bugfix", "grpo", "success"], ["bugfix", "grpo", "failure"],
                                     ["bugfix", "ppo", "success"], ["bugfix", "ppo", "failure"]]
    assert all(len(r) == len(cols) for r in rows)
