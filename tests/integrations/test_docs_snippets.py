"""Every ```python block of docs/integrations/*.md runs as written (tiny scale), and prints what
the page says it shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
PAGES = ("pettingzoo.md", "skyrl.md", "trl.md")


def _snippets(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)


def _run(page: str) -> tuple[dict, str]:
    (code,) = _snippets(page)  # one runnable snippet per page
    ns: dict = {"__name__": f"docs_{page[:-3]}"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOCS / page), "exec"), ns)
    return ns, out.getvalue()


def test_every_page_exists_with_one_snippet():
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(PAGES)
    for page in PAGES:
        assert len(_snippets(page)) == 1, page
        assert "cannot express" in (DOCS / page).read_text(), page


def test_pettingzoo_snippet_plays_the_oracle_pair_to_a_verified_end():
    ns, out = _run("pettingzoo.md")
    assert out.strip() == "submitted_resolved reward 1.0 verified 1"
    assert ns["env"].agents == []


def test_skyrl_snippet_solves_the_long_horizon_v3_task():
    ns, out = _run("skyrl.md")
    first, metrics = out.strip().split("\n")
    assert first == "True 1.0 submitted_resolved 1"
    assert "'verified': 1.0" in metrics and "'hacked': 0.0" in metrics and "'turns': 6" in metrics
    assert ns["env"].env_id == "agentrl/LongHorizon-v3" and len(ns["table"]) == 4


@pytest.mark.slow
def test_trl_snippet_plays_a_rollout_and_builds_a_trainer(tmp_path):
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM
    from trl import GRPOTrainer

    from integrations.adapter_scripts import TEMPLATE, tiny_model_dir

    ns, out = _run("trl.md")
    lines = out.strip().split("\n")
    assert lines[-3] == "reward 0.0 verified 0 stop submitted_failed"  # the BugFix rollout
    assert lines[-2:] == ["submitted : resolved .", "reward 1.0 verified 1 turns 6"]  # LongHorizon-v3, 4 stages
    assert ns["lh"].report["task_id"] == "lh3-train-0" and ns["lh"].stop_reason == "submitted_resolved"
    model_dir = tiny_model_dir(tmp_path, [TEMPLATE.read_text()])
    trainer = ns["make_trainer"](Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                                 PreTrainedTokenizerFast.from_pretrained(model_dir), str(tmp_path / "out"),
                                 use_cpu=True, bf16=False, report_to="none", max_steps=1)
    assert isinstance(trainer, GRPOTrainer)
    assert sorted(t.__name__ for t in trainer.tools)[:3] == ["delete", "delete_test", "edit"]
