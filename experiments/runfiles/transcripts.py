"""Sample transcripts: what the agent did, with sampled tokens and environment tokens told apart.

``render(trajectory)`` -> text: a header (task, seed, stop reason, verifier result, training reward,
turns), then every segment (context window) in order; environment-written text (observations,
tool output) is plain, text the policy sampled is wrapped in ``«...»`` and followed by a
``[turn k: tool <status>, reward r]`` note (``, cut at the length cap`` when the action hit it).
Ids are decoded with a context layout's ``decode`` (``algos.backend``; default the word layout of
``envs.tokenizer``): special tokens (BOS / SEP / EOS / PAD, chat-template markers) are not shown.

``save_transcripts(run_dir, trajectories, layout=...)`` keeps one success and one failure (the unmasked
trajectories with ``verified`` 1 resp. 0, the first ones in request order: deterministic) and
writes ``run_dir/transcripts.json``: ``{"transcripts": [record, ...]}``, a record being
``{"outcome": "success"|"failure", "task_id", "index", "seed", "stop_reason", "verified",
"train_reward", "turns", "text", "parts": [{"kind": "env"|"sampled", "text"}, ...]}``.
``load_transcripts(run_dir)`` reads it back (``[]`` when the file is absent).
``wandb_transcripts(records)`` gives the payload a logger can log (``wandb.Table``, or
``wandb.Html`` with ``as_html=True``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from algos.batch import Segment, Trajectory
from algos.backend import WORD_LAYOUT, ContextLayout

FILE_NAME = "transcripts.json"
SAMPLED_OPEN, SAMPLED_CLOSE = "«", "»"
OUTCOMES = ("success", "failure")


def segment_parts(segment: Segment) -> list[tuple[str, list[int], int | None]]:
    """Runs of equal ``action_mask`` in ``segment``: ``(kind, ids, turn number in the segment or
    None)``, kind ``"sampled"`` (mask 1) or ``"env"`` (mask 0), in token order."""
    ends = {t.end: u for u, t in enumerate(segment.turns)}
    parts: list[tuple[str, list[int], int | None]] = []
    cur_kind, cur_ids, cur_turn = None, [], None
    for i, (tok, m) in enumerate(zip(segment.tokens, segment.action_mask)):
        kind = "sampled" if m else "env"
        if kind != cur_kind and cur_ids:
            parts.append((cur_kind, cur_ids, cur_turn))
            cur_ids, cur_turn = [], None
        cur_kind = kind
        cur_ids.append(int(tok))
        if kind == "sampled" and i in ends:
            cur_turn = ends[i]
    if cur_ids:
        parts.append((cur_kind, cur_ids, cur_turn))
    return parts


def header(trajectory: Trajectory) -> str:
    """One line: task, seed, stop reason, verifier result, training reward, turns, tokens."""
    verified = "masked (not scored)" if trajectory.masked else ("pass" if trajectory.verified else "fail")
    return (f"task {trajectory.task_id or '?'} | seed {trajectory.seed} | stop reason: {trajectory.stop_reason or '?'} "
            f"| verifier: {verified} | train reward {trajectory.train_reward:g} | turns {trajectory.turns} "
            f"| sampled tokens {sum(s.n_sampled for s in trajectory.segments)}")


def _parts(trajectory: Trajectory, layout: ContextLayout = WORD_LAYOUT) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    turn_base = 0
    for k, seg in enumerate(trajectory.segments):
        out.append({"kind": "segment", "text": f"--- segment {k + 1}: start {seg.start}, end {seg.end} ---"})
        for kind, ids, turn in segment_parts(seg):
            text = layout.decode(ids).strip()
            if kind == "sampled":
                out.append({"kind": "sampled", "text": text})
                if turn is not None:
                    t = seg.turns[turn]
                    cap = ", cut at the length cap" if t.capped else ""
                    out.append({"kind": "note", "text": f"[turn {turn_base + turn + 1}: tool {t.tool_status}, "
                                                        f"reward {t.reward:g}{cap}]"})
            elif text:
                out.append({"kind": "env", "text": text})
        turn_base += len(seg.turns)
    return out


def _text(head: str, parts: Sequence[dict[str, str]]) -> str:
    lines = [head]
    for p in parts:
        if p["kind"] == "sampled":
            lines.append(f"{SAMPLED_OPEN}{p['text']}{SAMPLED_CLOSE}")
        else:
            lines.append(p["text"])
    return "\n".join(lines) + "\n"


def render(trajectory: Trajectory, layout: ContextLayout = WORD_LAYOUT) -> str:
    """The transcript of one trajectory as text (module docstring: the layout)."""
    return _text(header(trajectory), _parts(trajectory, layout))


def record(trajectory: Trajectory, outcome: str, layout: ContextLayout = WORD_LAYOUT) -> dict[str, Any]:
    """The JSON record of one trajectory (keys in the module docstring)."""
    parts = _parts(trajectory, layout)
    head = header(trajectory)
    return {
        "outcome": outcome, "task_id": trajectory.task_id, "index": trajectory.index, "seed": trajectory.seed,
        "stop_reason": trajectory.stop_reason, "verified": trajectory.verified,
        "train_reward": trajectory.train_reward, "turns": trajectory.turns, "header": head,
        "text": _text(head, parts), "parts": parts,
    }


def choose(trajectories: Sequence[Trajectory], per_method: int = 1) -> list[tuple[str, Trajectory]]:
    """Up to ``per_method`` successes then up to ``per_method`` failures (unmasked; first in
    request order, ties by ``index``)."""
    if isinstance(per_method, bool) or not isinstance(per_method, int) or per_method < 1:
        raise ValueError(f"per_method={per_method!r} invalid; allowed: an int >= 1")
    live = sorted((t for t in trajectories if not t.masked and t.verified is not None), key=lambda t: t.index)
    wins = [t for t in live if t.verified == 1][:per_method]
    losses = [t for t in live if t.verified == 0][:per_method]
    return [("success", t) for t in wins] + [("failure", t) for t in losses]


def save_transcripts(run_dir: str | Path, trajectories: Sequence[Trajectory], per_method: int = 1,
                     layout: ContextLayout = WORD_LAYOUT) -> Path:
    """Write ``run_dir/transcripts.json`` with ``per_method`` successes and failures of
    ``trajectories`` (e.g. the final evaluation's; ids decoded by ``layout``); returns the path."""
    path = Path(run_dir) / FILE_NAME
    records = [record(t, outcome, layout) for outcome, t in choose(trajectories, per_method)]
    path.write_text(json.dumps({"transcripts": records}, indent=1))
    return path


def load_transcripts(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``run_dir/transcripts.json`` (``[]`` when the run wrote none)."""
    path = Path(run_dir) / FILE_NAME
    if not path.is_file():
        return []
    return list(json.loads(path.read_text())["transcripts"])


def to_html(records: Sequence[dict[str, Any]], method: str = "") -> str:
    """HTML of ``records``: environment text plain, sampled text bold blue, notes grey."""
    out = []
    for r in records:
        out.append(f"<h4>{html.escape(method)} {html.escape(r['outcome'])}</h4>")
        out.append(f"<p><code>{html.escape(r['header'])}</code></p><pre style='white-space:pre-wrap'>")
        for p in r["parts"]:
            t = html.escape(p["text"])
            if p["kind"] == "sampled":
                out.append(f"<b style='color:#1f4fd1'>{SAMPLED_OPEN}{t}{SAMPLED_CLOSE}</b>\n")
            elif p["kind"] in ("note", "segment"):
                out.append(f"<span style='color:#888'>{t}</span>\n")
            else:
                out.append(t + "\n")
        out.append("</pre>")
    return "".join(out)


TABLE_COLUMNS = ("method", "outcome", "task_id", "stop_reason", "verified", "train_reward", "turns", "transcript")


def transcript_rows(records: Sequence[dict[str, Any]], method: str = "") -> list[list[Any]]:
    """Rows of :data:`TABLE_COLUMNS`, one per record (for any logger's ``log_table``)."""
    return [[method, r["outcome"], r["task_id"], r["stop_reason"], r["verified"], r["train_reward"], r["turns"],
             r["text"]] for r in records]


def wandb_transcripts(records: Sequence[dict[str, Any]], method: str = "", as_html: bool = False):
    """A ``wandb.Table`` (columns :data:`TABLE_COLUMNS`, :func:`transcript_rows`) or, with
    ``as_html``, a ``wandb.Html`` of :func:`to_html`; log it with ``wandb.log({"eval/transcripts":
    payload})`` (the W&B logger's ``log`` passes it through)."""
    import wandb  # lazy: optional heavy dependency, needed only to log to W&B

    if as_html:
        return wandb.Html(to_html(records, method))
    return wandb.Table(columns=list(TABLE_COLUMNS), data=transcript_rows(records, method))


__all__ = ["FILE_NAME", "TABLE_COLUMNS", "choose", "load_transcripts", "record", "render", "save_transcripts",
           "segment_parts", "to_html", "transcript_rows", "wandb_transcripts"]
