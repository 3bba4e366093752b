"""``python -m benchmarks gpu --model-config DIR --out DIR``: the Hugging Face path on one GPU,
as one prepared call (at most 8 minutes on an H100-class card).

The GPU machine has PyTorch, transformers and peft but no package registry, and SmolLM2's 540 MB
of weights do not travel; speed needs the architecture, not the weights. So ``--model-config``
is a directory with SmolLM2's ``config.json`` and tokenizer files (no weights), and the script:

1. resolves the device and dtype as a run does (``policy.device=auto``, ``policy.dtype=auto``:
   CUDA and bfloat16 where present) and prints them with the device's name;
2. builds the model of that ``config.json`` with random weights (seed 0) into ``<out>/model``
   beside the tokenizer files (``--dry-run``: 2 blocks, for a CUDA-less check of the whole script);
3. runs ``bench hf``'s shared-prefix rows there (:func:`benchmarks.hf.bench_shared_prefix`,
   :func:`~benchmarks.hf.bench_shared_update`: sampling and update ids/s with the shared
   prefix on and off), the update's model FLOP utilisation (the FLOP counter's ``6 N`` per
   processed id over the seconds, against the card's dense bfloat16 peak, :data:`PEAK_TFLOPS`)
   and the peak CUDA memory;
4. runs a few GRPO and PPO updates of the smollm2 preset's shape (``experiments.train
   policy=smollm2`` on the random model, no warm start: ``policy.init_checkpoint=''``, 2 updates
   of 16 rollouts; in the dry run 1 update of 4) and records each run's wall seconds and final summary;
5. writes ``<out>/gpu.json`` and ``<out>/gpu.md`` (a table for docs/own-model.md naming the device).

On the GPU machine (files travel, no registry): the wheels of gymnasium, hydra-core and omegaconf
(``pip download gymnasium hydra-core omegaconf --no-deps -d .cache/gpu-wheels``) and SmolLM2's
config and tokenizer files (``python -m benchmarks gpu --export-config .cache/smollm2-config``)
are carried, then::

    pip install --no-index --no-deps .cache/gpu-wheels/*.whl
    python -m benchmarks gpu --model-config .cache/smollm2-config --out $OUT
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from algos import metric_keys as mk

#: dense bfloat16 peak TFLOP/s by a substring of the device name (vendor data sheets)
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}
#: the files of a model directory that are not weights
CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.json", "merges.txt", "chat_template.jinja")
DEFAULT_MODEL = "~/.cache/agentrl/models/SmolLM2-135M-Instruct"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model-config", default=DEFAULT_MODEL, help="a model directory's config.json and tokenizer files")
    ap.add_argument("--out", default="runs/gpu", help="where the random model, gpu.json and gpu.md go")
    ap.add_argument("--rows", type=int, default=16, help="rollouts per collection (groups of 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dry-run", action="store_true", help="2 blocks, 1 repeat, 4 rows: the whole script in seconds")
    ap.add_argument("--export-config", default=None, metavar="DIR",
                    help="only copy --model-config's non-weight files to DIR (to carry to the GPU machine)")


def export_config(src: Path, dst: Path) -> list[str]:
    """Copy the non-weight files of model directory ``src`` into ``dst``; their names."""
    dst.mkdir(parents=True, exist_ok=True)
    copied = [n for n in CONFIG_FILES if (src / n).is_file()]
    for n in copied:
        shutil.copy2(src / n, dst / n)
    if "config.json" not in copied:
        raise FileNotFoundError(f"--model-config={src} has no config.json; allowed: a model directory")
    return copied


def random_model(config_dir: Path, out: Path, layers: int | None, dtype: torch.dtype) -> Path:
    """The model of ``config_dir/config.json`` with random weights (seed 0), saved with the
    tokenizer files into ``out`` (``layers``: fewer blocks, for the dry run)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    export_config(config_dir, out)
    cfg = AutoConfig.from_pretrained(str(config_dir))
    if layers is not None:
        cfg.num_hidden_layers = layers
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg, dtype=dtype).save_pretrained(str(out))
    return out


def peak_tflops(name: str) -> float | None:
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def train_runs(model: Path, out: Path, device: str, updates: int = 2, tasks: int = 4) -> list[dict]:
    """``updates`` GRPO and PPO updates of the smollm2 preset's shape on ``model`` (``tasks`` tasks x
    4 rollouts each; ``tasks`` held-out tasks evaluated every 2 updates): wall seconds and summary."""
    from experiments.compare.job import PRESET_METHODS

    rows = []
    for algo in PRESET_METHODS["smollm2"]:  # the smollm2 preset's methods (GRPO, PPO)
        cmd = [sys.executable, "-m", "experiments.train", "policy=smollm2", f"policy.path={model}", f"algo={algo}",
               "policy.init_checkpoint=", f"policy.device={device}", f"budget.amount={4 * tasks * updates}",
               "algo.group_size=4", f"algo.tasks_per_update={tasks}", f"eval.tasks={tasks}", "eval.every=2",
               "logger.kind=none", "progress=false", f"runs_root={out / 'runs'}"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        lines = (done.stdout + "\n" + done.stderr).splitlines()
        summary = next((json.loads(line) for line in reversed(lines) if line.startswith('{"')), {})
        rows.append({"algo": algo, "returncode": done.returncode, "seconds": time.perf_counter() - t0,
                     "summary": summary, "stderr_tail": done.stderr[-2000:] if done.returncode else ""})
    return rows


def measure(a: argparse.Namespace) -> dict:
    """Steps 1-4 of the module docstring; the numbers as one dict."""
    from algos.hf_backend import resolve_device_dtype
    from benchmarks.hf import bench_shared_prefix, bench_shared_update

    dev, dtype = resolve_device_dtype("auto", "auto")
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    out = Path(a.out).expanduser().resolve()
    model = random_model(Path(a.model_config).expanduser(), out / "model", 2 if a.dry_run else None, dtype)
    rows, repeats = (4, 1) if a.dry_run else (a.rows, a.repeats)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    rollout, trajs, c = bench_shared_prefix(str(model), str(dev), rows, repeats)
    update = bench_shared_update(c, trajs, repeats)
    n = sum(p.numel() for p in __import__("experiments.runtime.build", fromlist=["hf_policy"]).hf_policy(c).parameters())
    peak = peak_tflops(name)
    mfu = 6 * n * update["ours_tok_s"] / (peak * 1e12) if peak else None
    return {"device": name, "dtype": str(dtype).removeprefix("torch."), "torch": torch.__version__,
            "parameters": n, "rollout": rollout, "update": update, "update_mfu": mfu,
            "peak_memory_mib": torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else None,
            "train": train_runs(model, out, str(dev), *((1, 1) if a.dry_run else (2, 4))), "dry_run": a.dry_run}


def markdown(r: dict) -> str:
    """``gpu.md``: the rows docs/own-model.md takes, the device named."""
    lines = [f"Measured on {r['device']} ({r['dtype']}, torch {r['torch']}), SmolLM2-135M-Instruct's architecture "
             f"with random weights ({r['parameters'] / 1e6:.1f} M parameters)"
             + (" — DRY RUN (2 blocks), not a measurement" if r["dry_run"] else "") + ":", "",
             "| bench | shared prefix ids/s | unshared ids/s | ratio |", "|---|---|---|---|"]
    for row in (r["rollout"], r["update"]):
        lines.append(f"| {row['bench']} | {row['ours_tok_s']:.0f} | {row['baseline_tok_s']:.0f} | {row['ratio']:.2f}x |")
    mfu = "n/a (unknown peak)" if r["update_mfu"] is None else f"{100 * r['update_mfu']:.1f} %"
    mem = "n/a (CPU)" if r["peak_memory_mib"] is None else f"{r['peak_memory_mib']:.0f} MiB"
    lines += ["", f"Update model FLOP utilisation {mfu}; peak CUDA memory {mem}.", ""]
    lines += [f"- `{t['algo']}`, {t['summary'].get('updates', '?')} updates, {t['summary'].get(mk.COMPUTE_ROLLOUTS, '?')} rollouts: exit {t['returncode']}, {t['seconds']:.0f} s" for t in r["train"]]
    return "\n".join(lines) + "\n"


def run(a: argparse.Namespace) -> int:
    if a.export_config:
        names = export_config(Path(a.model_config).expanduser(), Path(a.export_config))
        print(f"exported {', '.join(names)} to {a.export_config}")
        return 0
    result = measure(a)
    out = Path(a.out).expanduser()
    (out / "gpu.json").write_text(json.dumps(result, indent=2, default=str))
    (out / "gpu.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if all(t["returncode"] == 0 for t in result["train"]) else 1


__all__ = ["CONFIG_FILES", "PEAK_TFLOPS", "add_arguments", "export_config", "markdown", "measure", "peak_tflops",
           "random_model", "run", "train_runs"]
