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


def _imported_modules(path: Path, with_names: bool = False) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions included);
    ``with_names``: also ``pkg.name`` for each ``from pkg import name`` (a module, when it is one)."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if with_names:
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
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


def _project_modules(roots: list[Path]) -> dict[str, Path]:
    """Dotted name -> file, for the packages under the source roots (``platform/`` holds
    ``contrasweep``; the repository root holds ``trainables`` and ``dashboards``)."""
    modules = {}
    for root, packages in roots:
        for package in packages:
            for path in sorted((root / package).rglob("*.py")):
                parts = path.relative_to(root).with_suffix("").parts
                modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _import_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, at any depth (``from pkg import mod`` names the
    module ``pkg.mod`` when that is one; ``from pkg.mod import name`` names ``pkg.mod``)."""
    edges = {}
    for name, path in modules.items():
        targets = _imported_modules(path, with_names=True)
        # not its own packages: Python runs those before the module whatever it imports
        edges[name] = {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
    return edges


def import_circles(modules: dict[str, Path]) -> list[set[str]]:
    """The groups of modules that import each other round a circle (strongly connected
    components of more than one module; scipy's csgraph finds them)."""
    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    names = sorted(modules)
    index = {n: i for i, n in enumerate(names)}
    pairs = [(index[a], index[b]) for a, targets in _import_edges(modules).items() for b in targets]
    rows, cols = (np.array(x, dtype=int) for x in zip(*pairs)) if pairs else (np.array([], int), np.array([], int))
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(graph, directed=True, connection="strong")
    groups = [{names[i] for i in np.flatnonzero(labels == label)} for label in np.unique(labels)]
    return sorted((g for g in groups if len(g) > 1), key=sorted)


def test_circle_checker_finds_a_planted_circle_through_a_lazy_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.c import g\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from pkg import a\n")  # imports into the circle, not part of it
    assert import_circles(_project_modules([(tmp_path, ["pkg"])])) == [{"pkg.a", "pkg.b", "pkg.c"}]


def test_no_import_circle_among_the_projects_modules():
    """No module of platform/, trainables/ or dashboards/ reaches itself through its imports
    (lazy ones included): before issue 26, ten modules around the tracker and two in data/ did."""
    modules = _project_modules([(ROOT / "platform", ["contrasweep"]), (ROOT, ["trainables", "dashboards"])])
    assert len(modules) > 80
    assert import_circles(modules) == []


# platform/contrasweep's rooms, lowest first (docs/architecture.md, "The rooms of
# platform/contrasweep/"): a room imports only rooms before it in this list, and its own.
ROOMS = ["errors", "data", "spec", "folder", "tracking", "search", "console", "runner", "api", "cli"]
OUTSIDE_ROOMS = {"contrasweep", "contrasweep.__main__"}


def _room(module: str) -> str:
    return module.split(".")[1]


def test_each_room_imports_only_the_rooms_below_it():
    modules = _project_modules([(ROOT / "platform", ["contrasweep"])])
    assert {_room(m) for m in modules if m not in OUTSIDE_ROOMS} == set(ROOMS)
    upward = sorted(f"{a} -> {b}" for a, targets in _import_edges(modules).items() if a not in OUTSIDE_ROOMS
                    for b in targets if b not in OUTSIDE_ROOMS and ROOMS.index(_room(b)) > ROOMS.index(_room(a)))
    assert upward == []


def test_the_top_level_holds_at_most_fifteen_modules():
    top = sorted(p.name for p in (ROOT / "platform" / "contrasweep").glob("*.py"))
    assert len(top) <= 15, top
    for package in (ROOT / "platform" / "contrasweep").iterdir():
        if package.is_dir() and any(package.glob("*.py")):  # a sub-package (not a cache folder)
            doc = (package / "__init__.py").read_text()
            assert doc.startswith('"""') and "May import" in doc.split('"""')[1], package.name


PROJECT = ("contrasweep", "trainables", "dashboards")


def may_import(doc: str) -> set[str] | None:
    """The project modules a docstring's ``May import:`` sentence names (the double-backticked
    ``contrasweep.*``, ``trainables.*`` and ``dashboards`` names before its first full stop or
    its "Never"); None without one."""
    import re

    found = re.search(r"May import:(.*?)(?:\.\s|\.$|Never|\Z)", doc, re.S)
    if found is None:
        return None
    return {n for n in re.findall(r"``([\w.]+)``", found.group(1)) if n.split(".")[0] in PROJECT}


def room_of(module: str) -> str:
    """A module's room: a sub-package (or module) of ``contrasweep``, or ``trainables`` or ``dashboards``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "contrasweep" else parts[0]


def covered(target: str, allowed: set[str]) -> bool:
    """``target`` is an allowed module, inside one, or a package above one (importing a package
    runs only its ``__init__``, which holds no code besides its docstring and names)."""
    return target == "contrasweep" or any(target == a or target.startswith(a + ".") or a.startswith(target + ".")
                                          for a in allowed)


def test_may_import_reads_the_sentence_before_never():
    doc = "Rooms.\n\nMay import: ``contrasweep.errors``, ``trainables.params`` (its\ndefaults), numpy. Never ``run``."
    assert may_import(doc) == {"contrasweep.errors", "trainables.params"}
    assert may_import("No statement here.") is None


def test_each_rooms_docstring_says_exactly_what_it_imports():
    """Every room (a sub-package of ``contrasweep``, ``contrasweep.errors``, ``trainables``,
    ``dashboards``) states in its docstring what it may import of the project's other rooms; the
    imports of its modules (lazy ones included) stay inside that, and each name it states is
    used. A module that states its own ``May import:`` is held to it too (its own room aside)."""
    import ast

    modules = _project_modules([(ROOT / "platform", ["contrasweep"]), (ROOT, ["trainables", "dashboards"])])
    edges = _import_edges(modules)
    rooms = {room_of(m) for m in modules if m not in OUTSIDE_ROOMS}
    assert rooms >= {"contrasweep.spec", "contrasweep.runner", "contrasweep.errors", "trainables", "dashboards"}
    wrong = []
    for room in sorted(rooms):
        stated = may_import(ast.get_docstring(ast.parse(modules[room].read_text())) or "")
        if stated is None:
            wrong.append(f"{room}: no 'May import:' in its docstring")
            continue
        members = [m for m in modules if room_of(m) == room and m not in OUTSIDE_ROOMS]
        outside = {t for m in members for t in edges[m] if room_of(t) != room}
        wrong += [f"{room} imports {t}, not stated" for t in sorted(outside) if not covered(t, stated)]
        wrong += [f"{room} states {a}, never imported" for a in sorted(stated) if room_of(a) != room
                  if not any(t == a or t.startswith(a + ".") for t in outside)]
        for m in members:
            own = may_import(ast.get_docstring(ast.parse(modules[m].read_text())) or "") if m != room else None
            if own is not None:
                wrong += [f"{m} imports {t}, not in its own docstring" for t in sorted(edges[m])
                          if room_of(t) != room and not covered(t, own)]
    assert wrong == []
