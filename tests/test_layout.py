"""platform/ is a source root, never a package: the standard `platform` module must win."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_standard_platform_module_is_not_shadowed():
    import platform

    import contrasweep

    assert platform.system()  # the standard library's function, not our folder
    assert hasattr(platform, "python_version")
    assert contrasweep.__version__


def test_platform_folder_has_no_init():
    assert not (ROOT / "platform" / "__init__.py").exists()


def test_torch_and_ray_import_beside_contrasweep():
    import ray  # noqa: F401  (both import the standard `platform` module)
    import torch

    import contrasweep.spec  # noqa: F401

    assert torch.tensor([1.0]).sum().item() == 1.0


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions included)."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_trainables_never_import_the_orchestration_layer():
    """Dependencies run one way: platform (contrasweep) -> trainables (docs/architecture.md)."""
    modules = sorted((ROOT / "trainables").rglob("*.py"))
    assert len(modules) > 20
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in _imported_modules(path) if n.split(".")[0] == "contrasweep")
        for path in modules
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_import_checker_sees_lazy_imports(tmp_path):
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    from contrasweep.spec import load\n    import contrasweep.data as d\n")
    assert _imported_modules(probe) == {"contrasweep.spec", "contrasweep.data"}


def test_repository_refers_to_no_path_outside_it():
    """The architecture document is docs/architecture.md, in the repository; nothing points to
    a design file or a shared folder beside the checkout."""
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert (ROOT / "docs" / "architecture.md").is_file()
    hits = []
    for name in files:
        if name == "tests/test_layout.py" or not name.endswith((".py", ".md", ".yaml", ".toml", ".txt", ".cfg")):
            continue
        text = (ROOT / name).read_text(errors="replace")
        hits += [f"{name}: {word}" for word in ("DESIGN.md", "../shared", "shared/papers") if word in text]
    assert hits == []
