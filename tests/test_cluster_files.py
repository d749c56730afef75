"""platform/cluster/: the deployment recipes name real CLI flags, real specs and the real
versions (package, Ray, MLflow), and have the shape their tools expect. Files are only parsed:
no Ray, no network, no container started (``docker compose config`` runs where Compose is installed)."""

from __future__ import annotations

import configparser
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

import contrasweep

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "platform" / "cluster"
LAUNCHER = CLUSTER / "ray-cluster.yaml"
RAYJOB = CLUSTER / "rayjob.yaml"
DOCKERFILE = CLUSTER / "Dockerfile"
COMPOSE = CLUSTER / "mlflow-server.yaml"
COMPOSE_ENV_EXAMPLE = CLUSTER / "mlflow-server.env.example"
GUIDE = CLUSTER / "README.md"
TEXT_FILES = (LAUNCHER, RAYJOB, DOCKERFILE, COMPOSE, GUIDE)
LAUNCHER_COMMAND_KEYS = ("initialization_commands", "setup_commands", "head_setup_commands",
                         "worker_setup_commands", "head_start_ray_commands", "worker_start_ray_commands")
GPU_INSTANCE_FAMILIES = {"g4dn", "g5", "g6", "g6e", "p3", "p4d", "p4de", "p5"}
SPEC_RE = re.compile(r"[\w./-]*search_spaces/[\w.-]+\.ya?ml")
IMAGE_TAG_RE = re.compile(r"(?<![\w-])contrasweep:([\w.-]+)")
INTERPOLATION_RE = re.compile(r"(?<!\$)\$\{(\w+)")  # compose's ${NAME...}; $${...} is an escaped $
REQUIRED_RE = re.compile(r"(?<!\$)\$\{\w+:\?[^}]+\}")  # ${NAME:?message}: a missing or empty NAME fails compose
SECRET_KEY_RE = re.compile(r"PASSWORD|SECRET|_KEY|TOKEN|ROOT_USER")
PASSWORD_IN_URI_RE = re.compile(r"\$\{|://[^/]*:[^/]*@")  # user:password@ or an interpolated part


# -- helpers -------------------------------------------------------------------------------

def shell_commands(line: str) -> list[list[str]]:
    """The arguments of every ``contrasweep ...`` call in one shell command line: what follows
    the word ``contrasweep`` up to the next ``&&``, ``;``, ``|`` or the line's end. Quoted
    command strings (``ray exec CONFIG "contrasweep run ..."``) are searched too."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    found = []
    for i, token in enumerate(tokens):
        if token == "contrasweep":
            argv = []
            for arg in tokens[i + 1:]:
                if arg and set(arg) <= set("();<>|&"):
                    break
                argv.append(arg)
            found.append(argv)
        elif " " in token and "contrasweep" in token:
            found += shell_commands(token)
    return found


def parse_cli(argv: list[str]):
    """``contrasweep``'s own parser; a flag it does not know fails with argparse's message.
    Flags must be spelled in full (argparse would also take an abbreviation such as --nam)."""
    import argparse

    from contrasweep.cli import build_parser

    parser = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"`contrasweep {shlex.join(argv)}` does not parse: {err.getvalue().strip()}") from exc
    known = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            known |= set(action.choices[args.command]._option_string_actions)
    abbreviated = [a.split("=")[0] for a in argv if a.startswith("--") and a.split("=")[0] not in known]
    assert not abbreviated, f"`contrasweep {shlex.join(argv)}`: spell these flags in full: {abbreviated}"
    return args


def markdown_code_lines(text: str) -> list[str]:
    """Lines of the fenced code blocks, with backslash continuations joined."""
    lines, inside, pending = [], False, ""
    for raw in text.splitlines():
        if raw.strip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    return lines


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, continuation lines joined."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        word, _, rest = (pending + line).partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    assert not pending, "a Dockerfile instruction ends with a continuation"
    return out


def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKERFILE.read_text())


def build_args() -> dict[str, str]:
    return dict(arg.split("=", 1) for op, arg in dockerfile() if op == "ARG" and "=" in arg)


def base_image() -> str:
    (image,) = [arg.split()[0] for op, arg in dockerfile() if op == "FROM"]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: build_args()[m.group(1) or m.group(2)], image)


def app_dir() -> str:
    (workdir,) = [arg for op, arg in dockerfile() if op == "WORKDIR"]
    return workdir


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def requirement(name: str):
    from packaging.requirements import Requirement

    for dep in pyproject()["project"]["dependencies"]:
        req = Requirement(dep)
        if req.name == name:
            return req
    raise AssertionError(f"{name} is not a dependency in pyproject.toml")


def readme_cluster_section() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^## Running on a cluster\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "README.md has no '## Running on a cluster' section"
    return match.group(1)


def command_lines() -> dict[str, list[str]]:
    """Every shell command line of the recipes, by where it was found."""
    job = load(RAYJOB)
    launcher = load(LAUNCHER)
    lines = {
        "rayjob.yaml entrypoint": [job["spec"]["entrypoint"]],
        "ray-cluster.yaml": [c for key in LAUNCHER_COMMAND_KEYS for c in launcher.get(key) or []],
        "Dockerfile": [arg for op, arg in dockerfile() if op in ("RUN", "CMD", "ENTRYPOINT")],
        "platform/cluster/README.md": markdown_code_lines(GUIDE.read_text()),
        "README.md (Running on a cluster)": markdown_code_lines(readme_cluster_section()),
    }
    for service in load(COMPOSE)["services"].values():
        for key in ("command", "entrypoint"):
            value = service.get(key)
            if value:
                lines.setdefault("mlflow-server.yaml", []).append(value if isinstance(value, str) else shlex.join(value))
    return lines


def contrasweep_calls() -> list[tuple[str, list[str]]]:
    return [(where, argv) for where, lines in command_lines().items() for line in lines for argv in shell_commands(line)]


def local_spec(path: str) -> Path:
    """A spec path of a command, in this checkout: relative to the repository root, or under
    the image's copy of it (the Dockerfile's WORKDIR)."""
    if path.startswith("/"):
        prefix = app_dir().rstrip("/") + "/"
        assert path.startswith(prefix), f"{path}: an absolute spec path must lie in the image's repository copy {prefix}"
        path = path[len(prefix):]
    return ROOT / path


# -- the helpers themselves ------------------------------------------------------------------

def test_shell_commands_finds_each_call_and_only_calls():
    assert shell_commands("cd /x && contrasweep run search_spaces/ce.yaml --name a; echo done") == [
        ["run", "search_spaces/ce.yaml", "--name", "a"]]
    assert shell_commands("""ray exec c.yaml --tmux "contrasweep resume a --address auto" """) == [
        ["resume", "a", "--address", "auto"]]
    assert shell_commands("contrasweep run s.yaml --set 'sweep.resources={cpu: 1, gpu: 0.25}'|tee log") == [
        ["run", "s.yaml", "--set", "sweep.resources={cpu: 1, gpu: 0.25}"]]
    assert shell_commands("docker build -f platform/cluster/Dockerfile -t contrasweep:0.1.0 .") == []
    assert shell_commands("COPY . /home/ray/contrasweep") == []


def test_parse_cli_rejects_an_unknown_flag():
    assert parse_cli(["run", "search_spaces/ce.yaml", "--name", "x"]).name == "x"
    with pytest.raises(AssertionError, match="unrecognized arguments: --no-such-flag"):
        parse_cli(["run", "search_spaces/ce.yaml", "--no-such-flag", "1"])
    with pytest.raises(AssertionError, match="does not parse"):
        parse_cli(["launch", "search_spaces/ce.yaml"])
    with pytest.raises(AssertionError, match=r"spell these flags in full: \['--nam'\]"):
        parse_cli(["run", "search_spaces/ce.yaml", "--nam", "x"])


def test_markdown_and_dockerfile_readers():
    text = "prose `contrasweep run x`\n```bash\nray exec c.yaml \\\n  \"contrasweep list\"\n```\nafter\n"
    assert markdown_code_lines(text) == ['ray exec c.yaml    "contrasweep list"']
    assert dockerfile_instructions("# c\nFROM a:1\nRUN pip install . \\\n && echo ok\n") == [
        ("FROM", "a:1"), ("RUN", "pip install .  && echo ok")]


def test_local_spec_refuses_a_path_outside_the_image_copy():
    assert local_spec(app_dir() + "/search_spaces/ce.yaml") == ROOT / "search_spaces" / "ce.yaml"
    with pytest.raises(AssertionError, match="must lie in the image's repository copy"):
        local_spec("/opt/elsewhere/search_spaces/ce.yaml")


# -- commands, specs, versions --------------------------------------------------------------

def test_every_contrasweep_command_parses_with_the_real_cli():
    calls = contrasweep_calls()
    assert {"rayjob.yaml entrypoint", "platform/cluster/README.md"} <= {where for where, _ in calls}
    failures = []
    for where, argv in calls:
        try:
            parse_cli(argv)
        except AssertionError as exc:
            failures.append(f"{where}: {exc}")
    assert failures == []


def test_run_commands_name_real_specs_with_valid_overrides_and_names():
    from contrasweep.spec.load import _name, load_spec

    runs = [parse_cli(argv) for _, argv in contrasweep_calls() if argv[:1] == ["run"]]
    assert runs
    for args in runs:
        spec = local_spec(args.spec)
        assert spec.is_file(), f"{args.spec}: no such spec in the repository"
        load_spec(spec, args.overrides)  # the spec and every --set validate (SpecError otherwise)
        _name(args.name)


def test_every_named_spec_exists():
    named = {m.group(0) for path in TEXT_FILES for m in SPEC_RE.finditer(path.read_text())}
    named |= {m.group(0) for m in SPEC_RE.finditer(readme_cluster_section())}
    assert named
    missing = [name for name in sorted(named) if not local_spec(name).is_file()]
    assert missing == []


def test_package_version_everywhere():
    version = contrasweep.__version__
    assert pyproject()["project"]["version"] == version
    tags = {path.name: IMAGE_TAG_RE.findall(path.read_text()) for path in TEXT_FILES}
    for name in ("ray-cluster.yaml", "rayjob.yaml", "README.md", "Dockerfile"):
        assert tags[name], f"{name} names no contrasweep image"
    assert {tag for found in tags.values() for tag in found} == {version}
    labels = {}
    for op, arg in dockerfile():
        if op == "LABEL":
            labels.update(item.split("=", 1) for item in shlex.split(arg))
    assert labels.get("org.opencontainers.image.version") == version
    assert load(RAYJOB)["metadata"]["labels"]["app.kubernetes.io/version"] == version
    checks = [c for c in load(LAUNCHER)["setup_commands"] if "__version__ ==" in c]
    assert checks and all(re.search(r"__version__ == '([^']+)'", c).group(1) == version for c in checks)


def test_ray_and_python_of_the_image_match_pyproject():
    from packaging.specifiers import SpecifierSet

    match = re.fullmatch(r"rayproject/ray:(\d+\.\d+\.\d+)-py3(\d+)(-[\w-]+)?", base_image())
    assert match, f"base image {base_image()!r}: expected rayproject/ray:<version>-py3XX-<cuda|gpu>"
    ray_version, python = match.group(1), f"3.{match.group(2)}"
    assert "gpu" in (match.group(3) or "") or "cu" in (match.group(3) or ""), "the base image must be a CUDA image"
    assert requirement("ray").specifier.contains(ray_version)
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(python)
    assert load(RAYJOB)["spec"]["rayClusterSpec"]["rayVersion"] == ray_version
    major_minor = ".".join(ray_version.split(".")[:2]) + "."
    assert any(f"ray.__version__.startswith('{major_minor}')" in c for c in load(LAUNCHER)["setup_commands"])


def test_mlflow_server_installs_the_project_mlflow_range():
    from packaging.requirements import Requirement

    inline = load(COMPOSE)["services"]["mlflow"]["build"]["dockerfile_inline"]
    pins = [Requirement(word) for word in shlex.split(inline) if word.startswith("mlflow")]
    assert pins and all(pin.specifier == requirement("mlflow").specifier for pin in pins)


# -- the Dockerfile ---------------------------------------------------------------------------

def test_dockerfile_installs_cuda_torch_and_the_project_offline():
    ops = dockerfile()
    runs = " && ".join(arg for op, arg in ops if op == "RUN")
    torch_installs = [part for part in runs.split("&&") if "pip install" in part and "torch" in part]
    assert torch_installs and not any("cpu" in part for part in torch_installs), torch_installs
    assert "/whl/cpu" not in build_args().get("TORCH_INDEX_URL", "")
    assert re.search(r"pip install (--no-cache-dir )?\.(\s|$)", runs), "the image must `pip install .` the repository"
    env = {}
    for op, arg in ops:
        if op == "ENV":
            env.update(item.split("=", 1) for item in shlex.split(arg))
    assert env.get("HF_HUB_OFFLINE") == "1" and env.get("HF_DATASETS_OFFLINE") == "1"
    copies = [arg.split()[-1] for op, arg in ops if op == "COPY"]
    assert app_dir() in copies or "." in copies, "the repository must be copied to the WORKDIR"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "sweeps", "mlflow.db", "mlartifacts", ".git"} <= set(ignored)


# -- the Ray cluster launcher -----------------------------------------------------------------

def test_launcher_has_a_head_and_an_autoscaling_gpu_worker():
    cfg = load(LAUNCHER)
    for key in ("cluster_name", "max_workers", "provider", "auth", "available_node_types", "head_node_type",
                "setup_commands", "head_start_ray_commands", "worker_start_ray_commands"):
        assert key in cfg, key
    types = cfg["available_node_types"]
    assert cfg["head_node_type"] in types
    workers = {name: t for name, t in types.items() if name != cfg["head_node_type"]}

    def has_gpu(node_type):
        family = node_type["node_config"].get("InstanceType", "").split(".")[0]
        return node_type.get("resources", {}).get("GPU", 0) > 0 or family in GPU_INSTANCE_FAMILIES

    gpu = [t for t in workers.values() if has_gpu(t)]
    assert gpu, "no GPU worker type"
    assert all(t["max_workers"] > t.get("min_workers", 0) >= 0 for t in gpu)
    assert cfg["max_workers"] >= max(t["max_workers"] for t in gpu)
    assert IMAGE_TAG_RE.search(cfg["docker"]["image"])
    assert any("ray start --head" in c for c in cfg["head_start_ray_commands"])
    assert any(re.search(r"ray start --address=\$RAY_HEAD_IP:\d+", c) for c in cfg["worker_start_ray_commands"])


def test_launcher_keeps_token_authentication_on_every_node():
    """A `ray start --address` never turns token mode on by itself: every start command says
    so, and every node gets the same token file."""
    cfg = load(LAUNCHER)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [c for c in cfg[key] if "ray start" in c]
        assert starts and all(re.search(r"RAY_AUTH_MODE=token;.*ray start", c) for c in starts), cfg[key]
    assert cfg["file_mounts"].get("~/.ray/auth_token") == "~/.ray/auth_token"


# -- the KubeRay RayJob -----------------------------------------------------------------------

def test_rayjob_runs_a_sweep_on_a_head_and_gpu_workers():
    job = load(RAYJOB)
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    spec = job["spec"]
    assert spec["entrypoint"].startswith("contrasweep run ")
    assert spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    head = cluster["headGroupSpec"]
    assert "rayStartParams" in head
    images = {c["image"] for c in head["template"]["spec"]["containers"]}
    groups = cluster["workerGroupSpecs"]
    assert groups
    for group in groups:
        assert group["groupName"] and "rayStartParams" in group
        assert group["maxReplicas"] > group.get("minReplicas", 0)
        containers = group["template"]["spec"]["containers"]
        assert any(int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) >= 1 for c in containers), group["groupName"]
        images |= {c["image"] for c in containers}
    assert len(images) == 1, f"head and workers must run one image: {images}"
    assert IMAGE_TAG_RE.search(images.pop())
    assert cluster["authOptions"] == {"mode": "token"}  # KubeRay >= 1.5.1 hands every container the token


# -- the MLflow server ------------------------------------------------------------------------

def mlflow_command() -> list[str]:
    command = load(COMPOSE)["services"]["mlflow"]["command"]
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def option(argv: list[str], name: str) -> str:
    assert name in argv, f"mlflow server without {name}"
    return argv[argv.index(name) + 1]


def test_compose_has_postgres_s3_and_mlflow():
    services = load(COMPOSE)["services"]
    assert services["postgres"]["image"].startswith("postgres:")
    assert "minio" in services["minio"]["image"]
    argv = mlflow_command()
    assert argv[:2] == ["mlflow", "server"]
    backend = urlparse(option(argv, "--backend-store-uri"))
    assert backend.scheme.startswith("postgresql") and backend.hostname in services
    assert set(services["mlflow"]["depends_on"]) >= {backend.hostname}
    artifacts = urlparse(option(argv, "--artifacts-destination"))
    assert artifacts.scheme == "s3"
    assert urlparse(services["mlflow"]["environment"]["MLFLOW_S3_ENDPOINT_URL"]).hostname in services
    bucket_setup = " ".join(services["minio-bucket"]["entrypoint"])
    assert re.search(rf"mc mb \S* ?\w+/{re.escape(artifacts.netloc)}(\s|$)", bucket_setup)
    assert option(argv, "--host") == "0.0.0.0"


def test_every_tracking_uri_is_a_host_the_server_accepts():
    """MLflow 3.5+ answers only Host headers in --allowed-hosts (DNS rebinding protection)."""
    from mlflow.server.security_utils import is_allowed_host_header

    argv = mlflow_command()
    allowed = [h.strip() for h in option(argv, "--allowed-hosts").split(",")]
    port = int(option(argv, "--port"))
    uris = [parse_cli(a).tracking_uri for _, a in contrasweep_calls() if a[:1] in (["run"], ["report"], ["ui"])]
    remote = [urlparse(u) for u in uris if u and u.startswith("http")]
    assert remote
    for uri in remote:
        assert uri.port == port, uri.geturl()
        assert is_allowed_host_header(allowed, uri.netloc), f"{uri.netloc} is not in --allowed-hosts {allowed}"
    assert not is_allowed_host_header(allowed, "evil.example.com:5000")


def test_readme_points_to_the_cluster_guide():
    section = readme_cluster_section()
    assert "platform/cluster/README.md" in section
    for name in ("ray-cluster.yaml", "rayjob.yaml", "Dockerfile", "mlflow-server.yaml"):
        assert name in section and name in GUIDE.read_text()


def env_example() -> dict[str, str]:
    pairs = [line.split("=", 1) for line in COMPOSE_ENV_EXAMPLE.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert all(len(pair) == 2 for pair in pairs), "mlflow-server.env.example: every line is NAME=value or a comment"
    return {name.strip(): value.strip() for name, value in pairs}


def test_compose_runs_mlflow_basic_auth_with_users_in_postgres():
    compose = load(COMPOSE)
    services = compose["services"]
    mlflow = services["mlflow"]
    argv = mlflow_command()
    assert option(argv, "--app-name") == "basic-auth"
    inline = mlflow["build"]["dockerfile_inline"]
    assert any(word.startswith("mlflow[auth]") for word in shlex.split(inline)), "install mlflow[auth]"
    assert not PASSWORD_IN_URI_RE.search(option(argv, "--backend-store-uri")), "libpq takes the password from PGPASSWORD"
    (mount,) = [c for c in mlflow["configs"] if c["target"] == mlflow["environment"]["MLFLOW_AUTH_CONFIG_PATH"]]
    content = compose["configs"][mount["source"]]["content"]
    ini = configparser.ConfigParser()  # as MLflow reads it: a stray % fails here too
    ini.read_string(REQUIRED_RE.sub("0123456789abcdef", content))
    auth = ini["mlflow"]
    assert auth["default_permission"] == "READ"
    assert auth["authorization_function"] == "mlflow.server.auth:authenticate_request_basic_auth"
    assert auth["admin_username"]
    assert REQUIRED_RE.fullmatch(re.search(r"^admin_password = (.*)$", content, re.M).group(1))
    users = urlparse(auth["database_uri"])
    assert users.scheme.startswith("postgresql") and users.hostname in services
    assert not PASSWORD_IN_URI_RE.search(auth["database_uri"])
    database = users.path.lstrip("/")
    assert database != urlparse(option(argv, "--backend-store-uri")).path.lstrip("/")
    makers = [name for name, service in services.items()
              if re.search(rf"(createdb|CREATE DATABASE) {database}\b", " ".join(service.get("entrypoint") or []))]
    assert makers and all(mlflow["depends_on"][name]["condition"] == "service_completed_successfully" for name in makers)


def test_compose_publishes_only_the_tracking_port():
    port = option(mlflow_command(), "--port")
    published = {}
    for name, service in load(COMPOSE)["services"].items():
        for entry in service.get("ports") or []:
            if isinstance(entry, dict):
                published.setdefault(name, []).append((str(entry.get("published")), str(entry["target"])))
            else:
                host, _, container = str(entry).rpartition(":")
                published.setdefault(name, []).append((host.rpartition(":")[2], container))
    assert published == {"mlflow": [(port, port)]}, f"published ports: {published}; only mlflow's {port}"


def test_compose_secrets_come_from_the_env_file():
    text = COMPOSE.read_text()
    assert "change-me" not in text and "password1234" not in text
    for name, service in load(COMPOSE)["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_KEY_RE.search(key):
                assert REQUIRED_RE.fullmatch(str(value)), f"{name}: {key} must be ${{{key}:?...}} from .env, not {value!r}"
    used = set(INTERPOLATION_RE.findall(text))
    assert used and len(REQUIRED_RE.findall(text)) == len(INTERPOLATION_RE.findall(text)), "every ${...} must be ${NAME:?message}"
    example = env_example()
    assert used <= set(example), f"not in mlflow-server.env.example: {sorted(used - set(example))}"
    assert all("change-me" in value for value in example.values()), "mlflow-server.env.example holds placeholders only"
    assert "platform/cluster/.env" in (ROOT / ".gitignore").read_text().split()
    for where in (COMPOSE.read_text(), GUIDE.read_text()):
        assert "--env-file platform/cluster/.env -f platform/cluster/mlflow-server.yaml" in where
        assert "cp platform/cluster/mlflow-server.env.example platform/cluster/.env" in where


def test_compose_config_takes_the_env_file():
    """``docker compose config`` (parses and interpolates; starts nothing) where the Compose
    plugin is installed: the example's values make a valid file, none at all fail by name."""
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("no docker compose")
    env = {k: v for k, v in os.environ.items() if k not in env_example() and not k.startswith("COMPOSE_")}

    def config(env_file):
        return subprocess.run([docker, "compose", "--env-file", str(env_file), "-f", str(COMPOSE), "config", "--quiet"],
                              capture_output=True, text=True, env=env, timeout=60)

    done = config(COMPOSE_ENV_EXAMPLE)
    assert done.returncode == 0, done.stderr
    done = config(os.devnull)
    assert done.returncode != 0 and re.search("|".join(env_example()), done.stderr), done.stderr
