"""Every ``python -m ...`` command in the ```bash blocks of README.md and docs/*.md runs, at tiny scale.

The commands are parsed from the README and the docs pages themselves (``DOC_FILES``), so they
cannot drift: a new command without a tiny rule below fails
``test_every_readme_command_has_a_tiny_rule`` (fast, not ``slow``), and each
command runs (cwd = a temporary directory, so ``runs/`` and ``.cache/`` land there) with the cheap
switch its entry point offers appended. They run in the test process (``tests/entry.py``'s
``run_entry``: ``python -m`` via runpy, argv / cwd / environment patched, state put back; a
subprocess per command cost ~6-7 s of imports each), a compare command's sweep included
(``sweep_in_process``), except the ``experiments.train -m`` sweep, whose joblib launcher starts
worker processes: that one runs as a subprocess (``sys.executable``).

- ``experiments.train``: ``experiment=tiny`` and a tiny ``budget.amount`` (a multirun of a
  compare preset: the tiny preset added to it, ``experiments.compare.TINY_PRESET``, ``seed=0`` and
  one joblib worker; a run of another preset, ``experiment=learn_tiny`` for example: the tiny preset
  added to that preset), without the command's own ``budget.amount`` and ``warmstart.demos``
  (``TINY_SIZES``: the tiny preset's run instead);
- ``experiments.compare``: ``--tiny``, ``env.kwargs.n_stages=4`` in place of any other horizon
  (the horizon preset's default included) and no ``budget.amount`` or ``warmstart.demos`` of its own (plus
  ``--dry-run`` for the Ray launcher, whose real multirun is tests/experiments/test_launchers.py's;
  the ``--methods`` example runs at ``--tiny`` in tests/experiments/test_compare_methods.py,
  ``--preset pairfix`` in tests/experiments/test_compare_pairfix.py, ``--horizons`` in
  tests/experiments/test_compare_horizons.py, which also runs ``experiments.report.horizons`` on
  fixture sweeps, ``--check-probs`` (the map) in tests/experiments/test_compare_map.py, and
  ``experiments.report.map`` on fixture cells in tests/experiments/test_report_map.py, ``--off-policy``
  (the off-policy map) in tests/experiments/test_compare_offpolicy.py, and
  ``experiments.report.offpolicy`` on fixture cells in tests/experiments/test_report_offpolicy.py,
  ``experiments.report.archive`` on fixture sweeps in tests/experiments/test_report_archive.py);
  ``experiments.report.ablation``: run on fixture sweeps by
  tests/experiments/test_report_ablation.py;
- ``experiments.warmstart``: ``experiment=tiny``;
  ``experiments.calibrate``: ``--episodes 5`` (in place of any ``--episodes N``; without the band
  difficulties unless ``--difficulties`` names them; with
  ``--start-model``, ``--horizons 4`` and the tiny preset: one 16-demo warm start);
  ``experiments.critic_probe``: 8 rollouts, 2 steps on ``experiment=learn_tiny``;
  ``experiments.value_ceiling``: run on a 2-update learn_tiny PPO run by
  tests/experiments/test_value_ceiling.py;
- ``benchmarks envs``: ``--steps 300 --repeats 1``; ``benchmarks train``: ``--quick``;
  ``benchmarks async``: ``--quick --repeats 1``;
  ``benchmarks hf``: 2 rows, 4 new tokens, 2 turns of 2 tokens, 1 repeat;
  ``benchmarks gpu``: its dry run by tests/benchmarks/test_bench_gpu.py;
- ``experiments.hf_tiny``: as written (seconds); a run with ``policy.path=models/hf-tiny``: run at
  tiny scale on a model built by tests/experiments/test_hf_policy.py (``env=pairfix``:
  tests/experiments/test_pair_hf.py);
- the plain ``experiments.compare`` (``make demo``) and ``experiments.report runs/compare/<sweep>``:
  run at ``--tiny`` scale, the report re-rendered from that sweep, by
  tests/experiments/test_compare.py (one sweep for both, not a second one here);
- ``experiments.reproduce_claims``: run in full by tests/experiments/test_reproduce_claims.py (it
  has no tiny mode; here we only check that such a test exists), ``--docs`` on a copy of
  docs/claims.md by tests/claims/test_claims_docs.py; ``benchmarks e2e``: run
  ``--quick`` on a tiny policy by tests/benchmarks/test_bench_e2e.py;
- ``experiments.metrics_doc``: run on a drifted copy of docs/metrics.md and with ``--check`` on the
  page by tests/test_metric_contract.py (the command itself writes the repository's page).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from entry import run_entry
from envs.bugfix.config import DIFFICULTIES
from experiments.compare import TINY_PRESET, NoticeFilter
from experiments.calibrate.band import BUGFIX_BANDS
from experiments.runtime.schema import WarmstartConfig

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The files whose ```bash blocks are parsed: the README and every top-level docs page.
DOC_FILES: tuple[Path, ...] = (README, *sorted((ROOT / "docs").glob("*.md")))
#: the model directory the docs' ``experiments.hf_tiny`` command writes (docs/own-model.md)
HF_TINY_DIR = "models/hf-tiny"
TINY_BUDGET = {"rollouts": "32", "generated_tokens": "300", "tool_seconds": "50", "train_flops": "1e9"}
#: the sizes of a command that the tiny preset sets too: left out where the preset is added to a
#: command's own preset (an override after it would win over the preset's)
TINY_SIZES = ("budget.amount=", "warmstart.demos=")


def bash_commands(path: Path) -> list[str]:
    """The ``python -m`` lines of ``path``'s ```bash blocks, comments stripped, in order, once each."""
    out: list[str] = []
    in_bash = False
    for line in path.read_text().splitlines():
        if line.strip().startswith("```"):
            in_bash = line.strip() == "```bash" if not in_bash else False
            continue
        if in_bash:
            cmd = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            if "python -m " in cmd and cmd not in out:
                out.append(cmd)
    return out


def readme_commands() -> list[str]:
    """The commands of every file of ``DOC_FILES``, README first, once each."""
    out: list[str] = []
    for path in DOC_FILES:
        out += [cmd for cmd in bash_commands(path) if cmd not in out]
    return out


def command_source(cmd: str) -> str:
    """The first file of ``DOC_FILES`` that holds ``cmd`` (for error messages)."""
    return next((str(p.relative_to(ROOT)) for p in DOC_FILES if cmd in bash_commands(p)), "?")


@dataclass
class Case:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    covered_by: str = ""  # not run here: the test module that runs this entry point in full


def _split(cmd: str) -> tuple[dict[str, str], str, list[str]]:
    """``VAR=x .venv/bin/python -m module args`` -> (env, module, args)."""
    words = shlex.split(cmd.replace("<sweep>", "__SWEEP__"))
    env = {}
    while "=" in words[0] and not words[0].startswith(("-", ".")) and "python" not in words[0]:
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    assert words[0].endswith("python") and words[1] == "-m", cmd
    return env, words[2], words[3:]


def tiny_case(cmd: str) -> Case:
    """The tiny version of README command ``cmd``; ``LookupError`` when no rule covers it."""
    env, module, args = _split(cmd)
    exe = [sys.executable, "-m", module]
    overrides = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a and not a.startswith("-")}
    if module == "experiments.reproduce_claims" and not args:
        return Case(exe, covered_by="tests/experiments/test_reproduce_claims.py")
    if module == "experiments.reproduce_claims" and args == ["--docs"]:
        # rewrites docs/claims.md's closed-form table: run on a copy of the page by its own test
        return Case(exe + args, covered_by="tests/claims/test_claims_docs.py")
    if any(a == f"policy.path={HF_TINY_DIR}" for a in args):
        # a run of the Hugging Face model that `experiments.hf_tiny --out models/hf-tiny` builds: the
        # same runs (warm start, grpo / ppo / gigpo, long horizon with compression, compare) at tiny
        # scale on a model built in that test module (commands here share no working directory order);
        # the two-agent runs (env=pairfix) by tests/experiments/test_pair_hf.py
        module_test = "test_pair_hf.py" if overrides.get("env") == "pairfix" else "test_hf_policy.py"
        return Case(exe + args, covered_by=f"tests/experiments/{module_test}")
    if module == "experiments.hf_tiny":
        return Case(exe + args, env)
    if module == "benchmarks" and args[:1] == ["gpu"]:
        # the GPU call: its CUDA-less dry run (the whole script, 2 blocks) by its own test
        return Case(exe + args, covered_by="tests/benchmarks/test_bench_gpu.py")
    if module == "benchmarks" and args == ["hf"]:
        # with an empty model cache: the tiny model's benchmark needs no fetched SmolLM2
        return Case(exe + args + ["--rows", "2", "--new", "4", "--turns", "2", "--action", "2", "--repeats", "1"],
                    {**env, "AGENTRL_MODELS": "empty-model-cache"})
    if module == "experiments.train" and "-m" in args:
        assert any(a.startswith("experiment=compare_") for a in args), cmd
        # one joblib worker process (a second one costs its own imports: seconds at this scale)
        kept = [a for a in args if not a.startswith(TINY_SIZES)]
        return Case(exe + kept + [TINY_PRESET, "seed=0", "logger.kind=none", "hydra.launcher.n_jobs=1"], env)
    if module == "experiments.train" and overrides.get("experiment", "tiny") != "tiny":
        # a preset (learn_tiny, learn_bugfix, ...): the preset itself, shrunk by the tiny preset
        # added to it (+experiment@_global_=tiny, its batch derived for the env's agents)
        kept = [a for a in args if not a.startswith(TINY_SIZES)]
        shrink = ["warmstart.eval_samples_per_task=2", "eval.train_split=false"]
        if overrides.get("env") == "pairfix":
            shrink = []
        return Case(exe + kept + [TINY_PRESET] + shrink + ["logger.kind=none"], env)
    if module == "experiments.train":
        # the tiny preset composes with the command's env, policy and compression (its window and
        # compression budget fit them: tests/experiments/test_tiny_preset.py)
        tiny = ["experiment=tiny", f"budget.amount={TINY_BUDGET[overrides.get('budget.kind', 'rollouts')]}"]
        return Case(exe + args + tiny, env)
    if module == "experiments.compare" and args == ["--preset", "horizon", "--methods", "grpo,gigpo"]:
        # the --methods example: run at --tiny (4 decisions) by its own end-to-end test (one sweep, not two)
        return Case(exe + args, covered_by="tests/experiments/test_compare_methods.py")
    if module == "experiments.compare" and "--check-probs" in args:
        # one sweep per (horizon, check_prob) cell, each cell's EV*, then map.md: at --tiny by its own test
        return Case(exe + args, covered_by="tests/experiments/test_compare_map.py")
    if module == "experiments.report.map":
        return Case(exe + args, covered_by="tests/experiments/test_report_map.py")
    if module == "experiments.compare" and "--off-policy" in args:
        # one sweep per (horizon, staleness x sampler dtype x correction) cell, then offpolicy.md: a
        # two-cell grid at --tiny (the baseline and one asynchronous cell) by its own test
        return Case(exe + args, covered_by="tests/experiments/test_compare_offpolicy.py")
    if module == "experiments.report.offpolicy":
        return Case(exe + args, covered_by="tests/experiments/test_report_offpolicy.py")
    if module == "experiments.report.archive":
        return Case(exe + args, covered_by="tests/experiments/test_report_archive.py")
    if module == "experiments.compare" and "--horizons" in args:
        # one sweep per horizon: run at --tiny (two horizons, two methods) by its own end-to-end test
        return Case(exe + args, covered_by="tests/experiments/test_compare_horizons.py")
    if module == "experiments.report.horizons":
        return Case(exe + args, covered_by="tests/experiments/test_compare_horizons.py")
    if module == "experiments.report.ablation":
        return Case(exe + args, covered_by="tests/experiments/test_report_ablation.py")
    if module == "experiments.compare" and args == ["--preset", "pairfix"]:
        # two agents: run at --tiny by its own end-to-end test (one sweep, not two)
        return Case(exe + args, covered_by="tests/experiments/test_compare_pairfix.py")
    if module == "experiments.compare" and not args:
        return Case(exe, covered_by="tests/experiments/test_compare.py")
    if module == "experiments.compare":
        pre, post = (args[: args.index("--")], args[args.index("--"):]) if "--" in args else (args, [])
        # Ray: the sweep command is built and printed (--dry-run); a real Ray multirun of the
        # project's launcher config runs in tests/experiments/test_launchers.py (here it would add
        # ~50 s, and RAY_ADDRESS=HEAD_IP needs a cluster)
        extra = ["--tiny"] + (["--dry-run"] if "--launcher" in pre and "ray" in pre else [])
        # no wandb runs (~5 s each): the wandb side of a sweep is test_compare's tiny end-to-end run
        extra += [] if "--logger" in pre else ["--logger", "none"]
        # a horizon of the horizon preset at tiny scale: 4 decisions (LongHorizon-v3's fewest), not
        # 32 or 64, from --tiny's 16-demo warm start at its budget, not the command's own (the
        # overrides after -- win over the tiny preset)
        post = ["env.kwargs.n_stages=4" if a.startswith("env.kwargs.n_stages=") else a for a in post
                if not a.startswith(TINY_SIZES)]
        if args[:2] == ["--preset", "horizon"] and not any(a.startswith("env.kwargs.n_stages=") for a in post):
            post = (post or ["--"]) + ["env.kwargs.n_stages=4"]  # the preset's default horizon too
        return Case(exe + pre + extra + post, env)
    if module == "experiments.report" and args == ["runs/compare/__SWEEP__"]:
        return Case(exe + args, covered_by="tests/experiments/test_compare.py")
    if module == "experiments.calibrate":
        kept = [a for i, a in enumerate(args) if a != "--episodes" and (i == 0 or args[i - 1] != "--episodes")]
        tiny = []
        if "--start-model" in kept:  # one tiny start model (a 16-demo warm start) at 4 decisions, not one per horizon
            at = kept.index("--horizons") if "--horizons" in kept else len(kept)
            end = next((i for i in range(at + 1, len(kept)) if not kept[i].isdigit()), len(kept))
            kept = kept[:at] + ["--horizons", "4"] + kept[end:]
            tiny = (["--"] if "--" not in kept else []) + [TINY_PRESET]
        if "--difficulties" not in kept:
            # a band difficulty's check is a claim about its rates that 5 episodes cannot support
            # (one lucky blind guess is 0.2 > 0.15): it runs at its own scale in
            # tests/experiments/test_calibrate_band.py
            kept = ["--difficulties", *(d for d in DIFFICULTIES if d not in BUGFIX_BANDS)] + kept
        return Case(exe + ["--episodes", "5"] + kept + tiny, env)
    if module == "experiments.warmstart":
        return Case(exe + args + ["experiment=tiny"], env)
    if module == "experiments.critic_probe":
        # a few rollouts and steps on the learning check's tutorial tasks (its warm start: seconds)
        return Case(exe + ["--rollouts", "8", "--steps", "2", "--every", "1", "--", "experiment=learn_tiny", "algo=ppo"], env)
    if module == "experiments.value_ceiling":
        # needs a PPO run directory: its tests train a 2-update learn_tiny PPO run and run the CLI on it
        return Case(exe + args, covered_by="tests/experiments/test_value_ceiling.py")
    if module == "benchmarks" and args == ["envs"]:
        return Case(exe + args + ["--steps", "300", "--repeats", "1"], env)
    if module == "benchmarks" and args == ["train"]:
        return Case(exe + args + ["--quick"], env)
    if module == "benchmarks" and args[:1] == ["async"]:
        # a tiny PPO run per mode, once (its subprocesses are real: the sampler is a process)
        return Case(exe + args + ["--quick", "--repeats", "1"], env)
    if module == "benchmarks" and args[:1] == ["e2e"]:
        # `--quick --no-baseline --no-bound` on a tiny policy and warm start (the learn preset's own
        # 3000-demo warm start would cost minutes on a fresh clone): that test's
        # test_quick_plumbing_on_a_tiny_config (the baseline is a checkout a fresh clone does not have)
        return Case(exe + args, covered_by="tests/benchmarks/test_bench_e2e.py")
    if module == "experiments.metrics_doc":
        # rewrites docs/metrics.md from the metric contract: run (on a copy of the page, and with
        # --check on the page itself) by its own test
        return Case(exe + args, covered_by="tests/test_metric_contract.py")
    raise LookupError(f"command of {command_source(cmd)} has no tiny rule in tests/test_readme_commands.py: {cmd}")


COMMANDS = readme_commands()


def test_every_readme_command_has_a_tiny_rule():
    assert len(COMMANDS) >= 10, COMMANDS  # the parser found the blocks
    for cmd in COMMANDS:
        case = tiny_case(cmd)
        if case.covered_by:
            text = (ROOT / case.covered_by).read_text()
            runs = (f'"-m", "{case.argv[2]}"', f'run_entry("{case.argv[2]}"')  # a subprocess or in-process
            assert any(r in text for r in runs), f"{case.covered_by} no longer runs {cmd}"
    with pytest.raises(LookupError, match="no tiny rule"):
        tiny_case(".venv/bin/python -m experiments.new_entry_point")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, shared_warmstart_cache) -> Path:
    """The cwd of every command (``runs/``, ``.cache/`` and ``multirun/`` land here); its default
    warm-start cache (``.cache/agentrl/warmstart``) is a link to the suite's shared one, so the
    commands run as written and a start model another test built is not built again."""
    cwd = tmp_path_factory.mktemp("readme")
    cache = cwd / WarmstartConfig.cache_dir
    cache.parent.mkdir(parents=True)
    cache.symlink_to(shared_warmstart_cache, target_is_directory=True)
    return cwd


def in_subprocess(case: Case) -> bool:
    """A Hydra multirun of ``experiments.train`` (the compare presets' joblib launcher: loky worker
    processes that would outlive the test in this process) runs as a subprocess; the rest in-process."""
    return case.argv[2] == "experiments.train" and "-m" in case.argv[3:]


def _run(case: Case, cwd: Path, timeout: int = 600):
    """``case`` run from ``cwd``: ``returncode``, ``stdout``, ``stderr`` (a CompletedProcess or
    an ``entry.EntryResult``)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true", **case.env}
    if not in_subprocess(case):
        # a compare command's sweep too (tests/entry.py's sweep_in_process): what is checked here
        # is what the command builds and reports; the sweep subprocess is test_compare's
        return run_entry(case.argv[2], case.argv[3:], cwd=cwd, env=env,
                         sweeps_in_process=case.argv[2] == "experiments.compare")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return subprocess.run(case.argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_docs_pages_are_parsed_too():
    """The docs pages' commands join the README's (a page's ```bash block is read like the README's)."""
    assert len(DOC_FILES) > 1 and all(p.suffix == ".md" for p in DOC_FILES)
    from_docs = {cmd for p in DOC_FILES[1:] for cmd in bash_commands(p)}
    assert from_docs, "no python -m command found in any docs/*.md ```bash block"
    assert from_docs <= set(COMMANDS)


def first_with_same_run(cmd: str) -> str | None:
    """An earlier command of ``COMMANDS`` whose tiny run is the same as ``cmd``'s (run once), or None."""
    mine = tiny_case(cmd)
    for other in COMMANDS[: COMMANDS.index(cmd)]:
        case = tiny_case(other)
        if case.argv == mine.argv and case.env == mine.env and not case.covered_by:
            return other
    return None


@pytest.mark.slow
@pytest.mark.parametrize("cmd", COMMANDS)
def test_readme_command_runs_at_tiny_scale(cmd, workdir):
    case = tiny_case(cmd)
    if case.covered_by:
        pytest.skip(f"runs in {case.covered_by}")  # checked by test_every_readme_command_has_a_tiny_rule
    if (same := first_with_same_run(cmd)) is not None:
        pytest.skip(f"the same tiny run as {same}")
    done = _run(case, workdir)
    assert done.returncode == 0, f"{' '.join(case.argv)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if in_subprocess(case):
        # the joblib launcher's jobs print Hydra's schema notice (configs/hydra/launcher/joblib.yaml
        # shadows the plugin's schema); the compare job's echo filter drops exactly that from this
        # real output and keeps the rest (each job's one-line JSON result)
        notice = "validated against ConfigStore schema"
        assert notice in done.stderr
        echo = NoticeFilter()
        shown = "".join(echo(line) for line in done.stderr.splitlines(keepends=True))
        # one job per method at seed 0: the command's algo=... values, else the preset's two (ppo, grpo)
        algos = [a.split("=", 1)[1] for a in case.argv if a.startswith("algo=")]
        jobs = len(algos[-1].split(",")) if algos else 2
        assert notice not in shown and shown.count('"run_dir": ') == done.stderr.count('"run_dir": ') == jobs
