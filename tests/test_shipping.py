"""contrasweep.runner.shipping: what a sweep on a cluster ships to its workers. Unit tests build the
runtime_env without Ray; two tests use the suite's shared Ray session (a task-level runtime_env
stands in for the job's, which cannot change on a running driver)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

import contrasweep
from contrasweep.errors import UserError
from contrasweep.runner import shipping
from contrasweep.runner.shipping import worker_env

ROOT = Path(__file__).resolve().parents[1]


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def model_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"hidden_size": 32}')
    (path / "model.safetensors").write_bytes(b"weights")
    return path


# -- the runtime_env, no Ray ----------------------------------------------------------------

def test_installed_ships_only_the_environment(tmp_path):
    env = shipping.runtime_env("installed", [model_folder(tmp_path / "bert")])
    assert env == {"env_vars": worker_env()}


def test_code_ships_the_imported_packages_with_excludes_and_env():
    env = shipping.runtime_env("code")
    modules = [Path(m) for m in env["py_modules"]]
    assert [m.name for m in modules] == ["contrasweep", "trainables"]  # dashboards runs on the driver only
    assert all(m.is_absolute() and (m / "__init__.py").is_file() for m in modules)
    assert modules[0] == Path(contrasweep.__file__).resolve().parent
    assert {"__pycache__/", "*.pyc", ".pytest_cache/", "*.egg-info/"} <= set(env["excludes"])
    assert env["env_vars"]["HF_HUB_OFFLINE"] == os.environ["HF_HUB_OFFLINE"]  # conftest sets it
    assert env["env_vars"]["OMP_NUM_THREADS"] == "1"
    # always a working_dir (no local files: only the manifest), so Ray does not put the
    # driver's cwd first on the workers' sys.path; trials keep it as their cwd
    staged = Path(env["working_dir"])
    assert [p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()] == [
        f"{shipping.FILES_DIR}/manifest.json"]
    assert env["env_vars"]["RAY_CHDIR_TO_TRIAL_DIR"] == "0"


def test_bad_ship_is_one_line():
    with pytest.raises(UserError) as exc:
        shipping.runtime_env("docker")
    assert "ship='docker'" in one_line(exc) and "allowed: code" in str(exc.value) and "installed" in str(exc.value)


def test_local_files_are_staged_where_worker_path_says(tmp_path, monkeypatch):
    bert = model_folder(tmp_path / "a" / "bert")
    other = model_folder(tmp_path / "b" / "bert")  # same name, other folder
    weights = tmp_path / "init.safetensors"
    weights.write_bytes(b"encoder")
    monkeypatch.chdir(tmp_path)
    env = shipping.runtime_env("code", ["a/bert", str(other), str(weights)])
    staged = Path(env["working_dir"])
    assert env["env_vars"]["RAY_CHDIR_TO_TRIAL_DIR"] == "0"
    assert shipping.worker_path("a/bert") == shipping.worker_path(bert)  # relative on the driver = absolute
    assert shipping.worker_path(bert) != shipping.worker_path(other)
    for value, source in (("a/bert", bert), (other, other), (weights, weights)):
        rel = shipping.worker_path(value)
        assert not os.path.isabs(rel) and rel.startswith(shipping.FILES_DIR + "/") and rel.endswith(source.name)
        assert (staged / rel).resolve() == source.resolve()
    manifest = json.loads((staged / shipping.FILES_DIR / "manifest.json").read_text())
    assert manifest == {shipping.worker_path(v): str(v) for v in ("a/bert", other, weights)}


def test_a_killed_drivers_staged_folder_goes_at_the_next_stage(tmp_path, monkeypatch):
    """atexit never runs in a SIGKILLed driver: its folder of links stayed in the temp folder
    (issue 57: 360 here); the next driver that stages removes those whose driver is gone."""
    import subprocess
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = tmp_path / f"{shipping.STAGE_PREFIX}{gone.pid}-abc"
    live = tmp_path / f"{shipping.STAGE_PREFIX}{os.getpid()}-def"
    for folder in (orphan, live):
        (folder / shipping.FILES_DIR).mkdir(parents=True)
    staged = shipping.stage([], limit=10**9)
    assert not orphan.exists() and live.exists() and staged.parent == tmp_path
    assert staged.name.startswith(f"{shipping.STAGE_PREFIX}{os.getpid()}-")


def test_a_reported_checkpoint_ships_its_best_folder(tmp_path, monkeypatch):
    """A pointer to a state folder on this machine only ships the best folder it names; one on
    a network file system ships as it is (workers follow it)."""
    from contrasweep.folder import sweep_storage

    best = model_folder(tmp_path / "trial" / "state" / "best-e0002")
    pointer = tmp_path / "checkpoint_000001"
    pointer.mkdir()
    (pointer / "meta.json").write_text(json.dumps({"state_dir": str(best.parent), "best": best.name}))
    staged = Path(shipping.runtime_env("code", [str(pointer)])["working_dir"])
    link = staged / shipping.worker_path(pointer)
    assert link.resolve() == best.resolve() and (link / "model.safetensors").is_file()
    monkeypatch.setattr(sweep_storage, "shared_path", lambda path: True)
    staged = Path(shipping.runtime_env("code", [str(pointer)])["working_dir"])
    assert (staged / shipping.worker_path(pointer)).resolve() == pointer.resolve()


def test_oversize_local_folder_is_one_line(tmp_path):
    big = model_folder(tmp_path / "big-model")
    (big / "model.safetensors").write_bytes(b"\0" * (3 * shipping.MiB // 2))
    with pytest.raises(UserError) as exc:
        shipping.runtime_env("code", [str(big)], limit=shipping.MiB)
    text = one_line(exc)
    assert str(big) in text and "1.5 MiB" in text and "at most 1.0 MiB" in text
    assert "install it on every worker node" in text and "network file system every node mounts" in text


def test_missing_local_file_is_one_line(tmp_path):
    with pytest.raises(UserError) as exc:
        shipping.runtime_env("code", [str(tmp_path / "nowhere")])
    assert "does not exist on the driver" in one_line(exc)


def test_excluded_files_do_not_count(tmp_path):
    folder = model_folder(tmp_path / "m")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"\0" * 4096)
    (folder / "y.pyc").write_bytes(b"\0" * 4096)
    assert shipping.shipped_bytes(folder) == len('{"hidden_size": 32}') + len(b"weights")


def test_package_limit_follows_ray(monkeypatch):
    monkeypatch.delenv("RAY_max_grpc_message_size", raising=False)
    assert shipping.ray_package_limit() == 512 * shipping.MiB
    monkeypatch.setenv("RAY_max_grpc_message_size", "1000")
    assert shipping.ray_package_limit() == 1000


def test_local_files_of_a_spec(tmp_path, monkeypatch):
    from contrasweep.folder import sweep_storage
    from contrasweep.spec.domains import Choice

    bert = model_folder(tmp_path / "bert")
    nfs = tmp_path / "nfs"
    monkeypatch.setattr(sweep_storage, "shared_path", lambda path: nfs in Path(path).resolve().parents)

    def sweep(name, **sections):
        return SimpleNamespace(**{"encoder": {"name": name}, "fixed": {}, "reported": {}, "grid": {}, "domains": {},
                                  **sections})

    assert shipping.local_files_of(sweep("default")) == []
    assert shipping.local_files_of(sweep("sentence-transformers/all-MiniLM-L6-v2")) == []  # a hub name
    spec = sweep(str(bert), fixed={"init_from": ""},
                 grid={"init_from": [str(nfs / "stage1"), "/ckpt/a.safetensors", "s3://bucket/stage1"]},
                 domains={"init_from": Choice(("/ckpt/b",))})  # the spec's search: {init_from: {choice: [...]}}
    assert shipping.local_files_of(spec) == [str(bert), "/ckpt/a.safetensors", "/ckpt/b"]


# -- on the shared Ray session ---------------------------------------------------------------

def uploaded(env: dict) -> dict:
    """What ``ray.init(runtime_env=env)`` does to a job's runtime_env before it starts: zip and
    upload the local py_modules and working_dir (with the excludes) to the cluster, leaving
    ``gcs://`` URIs. A task's runtime_env takes only URIs (Ray 2.60 refuses local folders
    below the job level), so the test runs Ray's own upload step (private API) first."""
    import ray
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed
    from ray._private.runtime_env.working_dir import upload_working_dir_if_needed

    scratch = ray._private.worker.global_worker.node.get_runtime_env_dir_path()
    env = upload_py_modules_if_needed(dict(env), include_gitignore=True, scratch_dir=scratch)
    env = upload_working_dir_if_needed(env, include_gitignore=True, scratch_dir=scratch)
    env.pop("excludes", None)
    assert all(str(uri).startswith("gcs://") for uri in [*env["py_modules"], env["working_dir"]]), env
    return env


@pytest.mark.slow
def test_workers_import_the_shipped_code_and_read_shipped_files(ray_session, tmp_path):
    """A task with the py_modules, excludes and working_dir of runtime_env("code", ...) imports
    the packages from Ray's runtime resources, not from this checkout, and reads the shipped
    model folder at worker_path() from its cwd.

    The suite's job has no working_dir, so Ray put the driver's cwd (this checkout, holding
    trainables/) first on every worker's sys.path; a job whose runtime_env has a working_dir,
    as runtime_env("code") always has, gets no such entry (ray/_private/worker.py, ``connect``).
    A task cannot change its job's sys.path, so the task drops that one entry itself."""
    ray = ray_session
    bert = model_folder(tmp_path / "bert")
    env = uploaded(shipping.runtime_env("code", [str(bert)]))
    rel = shipping.worker_path(bert)
    driver_cwd = os.getcwd()

    @ray.remote(num_cpus=0)
    def where() -> dict:
        import sys

        first = next(i for i, p in enumerate(sys.path) if "runtime_resources" in Path(p).parts)
        shadows = [p for p in sys.path[:first]  # copies that would win over the shipped ones
                   if any((Path(p or ".") / name / "__init__.py").is_file() for name in ("contrasweep", "trainables"))]
        sys.path[:] = [p for p in sys.path if p != driver_cwd]
        import contrasweep
        import trainables
        import trainables.loop  # noqa: F401 - the training loop imports from the shipped copy

        return {"contrasweep": contrasweep.__file__, "trainables": trainables.__file__, "shadows": shadows,
                "config": Path(rel, "config.json").read_text(), "chdir": os.environ.get("RAY_CHDIR_TO_TRIAL_DIR")}

    found = ray.get(where.options(runtime_env=env).remote(), timeout=300)
    assert found["shadows"] in ([], [driver_cwd])  # the only copy ahead of the shipped ones: the driver's cwd
    for name in ("contrasweep", "trainables"):
        path = Path(found[name]).resolve()
        assert ROOT not in path.parents and "runtime_resources" in path.parts, found
    assert found["config"] == '{"hidden_size": 32}' and found["chdir"] == "0"


@pytest.mark.slow
def test_worker_versions(ray_session):
    shipping.check_worker_versions(contrasweep.__version__)
    with pytest.raises(UserError) as exc:
        shipping.check_worker_versions("9.9.9")
    text = one_line(exc)
    assert "not the driver's 9.9.9" in text and f"has {contrasweep.__version__}" in text
    assert "install contrasweep==9.9.9 on every worker node" in text
    assert "sweep.ship: code" in text


# -- a whole sweep through --address ---------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("ship", ["code", "installed"])
def test_a_sweep_through_an_address_ships_or_checks(ship, ray_session, tiny_model_dir, cache_dir, tmp_path):
    """``contrasweep run --address`` (the cluster path, in a process of its own, started outside
    the repository) on the suite's Ray: with ``ship: code`` the job ships the packages and the
    local encoder folder, and trials read the folder at its worker path; with ``ship:
    installed`` the nodes' installed version is checked. Both sweeps finish.

    With ``code`` the method is a user's module in the driver's folder (``mylab.losses:CESupCon``,
    examples/ce_supcon.py, issue 56): a job with a working_dir does not put the driver's folder
    on its workers' path, so its trials import it only because the job shipped its package."""
    import shutil
    import subprocess
    import sys

    from conftest import write_spec

    method = {}
    if ship == "code":
        (tmp_path / "mylab").mkdir()
        (tmp_path / "mylab" / "__init__.py").write_text("")
        shutil.copy(ROOT / "examples" / "ce_supcon.py", tmp_path / "mylab" / "losses.py")
        method = {"method": "mylab.losses:CESupCon"}
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, fixed={"epochs": 1}, grid={"lr": [1.0e-3]},
                      sweep={"seeds": [0], "scheduler": "none", "ship": ship}, **method)
    address = ray_session.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, "-m", "contrasweep", "--root", str(tmp_path / "sweeps"), "run", str(spec), "--name", "shipped",
         "--address", address, "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads((tmp_path / "sweeps" / "shipped" / "sweep.json").read_text())
    assert meta["status"] == "finished"
    # the driver's report rebuilds the best model from the folder it shipped, not the worker path
    assert "report not written" not in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "sweeps" / "shipped" / "report").is_dir()
    if ship == "code":
        assert meta["method"]["path"] == "mylab.losses:CESupCon"
        assert meta["method"]["file"] == str((tmp_path / "mylab" / "losses.py").resolve())
        assert "CESupCon lr=0.001 · seed=0: complete" in done.stderr
