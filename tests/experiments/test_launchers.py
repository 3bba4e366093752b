"""configs/hydra/launcher/{joblib,ray}.yaml: the same multirun on both launchers.

A tiny Hydra app (written to tmp_path; its config adds the project's configs/ to the search path,
so ``hydra/launcher=joblib|ray`` resolve to the project's files) runs as a subprocess multirun:
- with the joblib launcher (jobs in worker processes, 2 at a time);
- with ``hydra/launcher=ray`` against a local Ray instance this test starts with ``ray.init``
  (the app connects to it through RAY_ADDRESS, the way a sweep joins a cluster), stopped at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"

APP = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import hydra
    from hydra.core.hydra_config import HydraConfig

    @hydra.main(version_base="1.3", config_path="conf", config_name="config")
    def main(cfg):
        hc = HydraConfig.get()
        info = {"seed": cfg.seed, "x": cfg.x, "pid": os.getpid(), "launcher": hc.launcher._target_}
        if "ray" in sys.modules:
            import ray
            if ray.is_initialized():
                info["ray_node"] = ray.get_runtime_context().get_node_id()
        Path(hc.runtime.output_dir, "result.json").write_text(json.dumps(info))
        return cfg.seed * cfg.x

    if __name__ == "__main__":
        main()
    """
)


@pytest.fixture
def tiny_app(tmp_path) -> Path:
    app_dir = tmp_path / "app"
    (app_dir / "conf").mkdir(parents=True)
    (app_dir / "app.py").write_text(APP)
    (app_dir / "conf" / "config.yaml").write_text(
        f"seed: 0\nx: 1\nhydra:\n  searchpath:\n    - file://{CONFIGS}\n"
    )
    return app_dir


def _run_multirun(app_dir: Path, sweep: Path, launcher: str, env: dict | None = None):
    proc = subprocess.Popen(
        [sys.executable, "app.py", "-m", "seed=0,1,2", "x=5", f"hydra/launcher={launcher}",
         f"hydra.sweep.dir={sweep}"],
        cwd=app_dir, env=env or dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"{launcher} multirun failed:\n{out}\n{err}"
    results = sorted((json.loads(p.read_text()) for p in sweep.glob("*/result.json")), key=lambda r: r["seed"])
    return proc.pid, results


# Our files shadow the plugins' structured configs of the same name, so Hydra validates them
# against those schemas and says that matching is deprecated; the validation is what we want.
@pytest.mark.filterwarnings("ignore:\\s*'hydra/launcher/\\w+' is validated against ConfigStore:UserWarning")
def test_launcher_configs_compose_against_plugin_schemas(tiny_app, monkeypatch):
    from hydra import compose, initialize_config_dir

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with initialize_config_dir(version_base="1.3", config_dir=str(tiny_app / "conf")):
        for launcher, target in [
            ("joblib", "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"),
            ("ray", "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"),
        ]:
            cfg = compose("config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
            node = cfg.hydra.launcher
            assert node._target_ == target
            if launcher == "joblib":
                assert node.n_jobs == 2 and node.prefer == "processes"
            else:
                # RAY_ADDRESS unset -> null -> ray.init starts a local instance;
                # object_store_memory present-but-null so connecting to a cluster is allowed.
                assert node.ray.init.address is None
                assert "object_store_memory" in node.ray.init and node.ray.init.object_store_memory is None
                assert node.ray.remote.num_cpus == 1
        monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
        cfg = compose("config", overrides=["hydra/launcher=ray"], return_hydra_config=True)
        assert cfg.hydra.launcher.ray.init.address == "10.0.0.1:6379"


@pytest.mark.slow
def test_joblib_multirun(tiny_app, tmp_path):
    sweep = tmp_path / "sweep_joblib"
    driver_pid, results = _run_multirun(tiny_app, sweep, "joblib")
    assert [r["seed"] for r in results] == [0, 1, 2]
    assert all(r["x"] == 5 for r in results)
    assert {r["launcher"] for r in results} == {"hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"}
    assert driver_pid not in {r["pid"] for r in results}  # jobs ran in worker processes
    assert (sweep / "multirun.yaml").is_file()


@pytest.mark.slow
def test_ray_multirun_against_local_instance(tiny_app, tmp_path, monkeypatch):
    import hydra_plugins.hydra_ray_launcher  # noqa: F401  (installed by the dev extra; never skipped)
    import ray
    # Token auth would write ~/.ray/auth_token; a throwaway local instance does not need it.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert not ray.is_initialized()
    # Ray's unix sockets need a short path, so not tmp_path; removed afterwards.
    ray_tmp = Path("/tmp") / f"ray_t{os.getpid()}"
    ctx = ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
                   log_to_driver=False, _temp_dir=str(ray_tmp))
    try:
        node_id = ray.get_runtime_context().get_node_id()
        env = dict(os.environ, RAY_ADDRESS=ctx.address_info["gcs_address"])
        driver_pid, results = _run_multirun(tiny_app, tmp_path / "sweep_ray", "ray", env=env)
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert [r["seed"] for r in results] == [0, 1, 2]
    assert {r["launcher"] for r in results} == {"hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"}
    # Every job ran as a Ray task on the instance this test started.
    assert {r.get("ray_node") for r in results} == {node_id}
    assert driver_pid not in {r["pid"] for r in results}
