"""The package's shape (docs/architecture.md): import layers, no cycles, one home for threads,
small modules and functions. Each test lists every offender, not just the first."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import jnrrd

ROOT = Path(jnrrd.__file__).parent
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is package) for every module of the package."""
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


MODULES = _modules()


def _target(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or '', line) for every jnrrd import, at any depth
    (module level and inside functions)."""
    path, is_pkg = MODULES[module]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, "", node.lineno) for a in node.names if a.name.startswith("jnrrd")]
        elif isinstance(node, ast.ImportFrom):
            target = _target(module, is_pkg, node)
            if not target.startswith("jnrrd"):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.append((sub, "", node.lineno) if sub in MODULES
                             else (target, a.name, node.lineno))
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for m in MODULES:
        for target, _, _ in imports_of(m):
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != m and target in MODULES:
                graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(MODULES):
        if m not in index:
            visit(m)
    return out


def test_the_import_walk_sees_function_level_imports() -> None:
    # api.read_header imports the NRRD bridge inside a function: the walk must see it
    assert any(t.startswith("jnrrd.nrrd") for t, _, _ in imports_of("jnrrd.api"))


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def _offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{m}:{line} imports {t}" for m in MODULES if m == package or
            m.startswith(package + ".") for t, _, line in imports_of(m)
            if t.startswith(forbidden)]


def test_storage_imports_nothing_above_it() -> None:
    above = ("jnrrd.header", "jnrrd.tiling", "jnrrd.codecs", "jnrrd.engine", "jnrrd.writing",
             "jnrrd.pyramid", "jnrrd.nrrd", "jnrrd.validation", "jnrrd.integrations",
             "jnrrd.api", "jnrrd.cli")
    assert _offenders("jnrrd.storage", above) == []


def test_codecs_import_nothing_above_them() -> None:
    above = ("jnrrd.header", "jnrrd.tiling", "jnrrd.storage", "jnrrd.engine", "jnrrd.writing",
             "jnrrd.pyramid", "jnrrd.nrrd", "jnrrd.validation", "jnrrd.integrations",
             "jnrrd.api", "jnrrd.cli", "jnrrd.policy", "jnrrd._threads")
    assert _offenders("jnrrd.codecs", above) == []


#: the core: bytes, headers, codecs, tiles, pyramids and the engine that joins them, and the
#: modules under them (docs/architecture.md, "Import rules")
CORE = ("jnrrd.storage", "jnrrd.header", "jnrrd.codecs", "jnrrd.tiling", "jnrrd.pyramid",
        "jnrrd.engine", "jnrrd.errors", "jnrrd.dtypes", "jnrrd.policy", "jnrrd._config",
        "jnrrd._threads", "jnrrd._platform", "jnrrd.schemas", "jnrrd.progress",
        "jnrrd.geometry", "jnrrd.optional")
#: (importer, forbidden targets, why): the directions docs/architecture.md draws
DIRECTIONS = [
    (CORE, ("jnrrd.integrations", "jnrrd.web", "jnrrd.cli", "jnrrd.clinical"),
     "the core never imports integrations, web, cli or clinical"),
    (("jnrrd.tiling",), ("jnrrd.codecs",), "tiling never imports codecs"),
    (("jnrrd.codecs",), ("jnrrd.tiling",), "codecs never import tiling"),
    (("jnrrd.pyramid",), ("jnrrd.engine",), "the pyramid knows no engine"),
]


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def direction_offenders() -> list[str]:
    """Every import against :data:`DIRECTIONS`, at any depth, as ``module:line imports x``."""
    return [f"{m}:{line} imports {t} ({why})" for importers, forbidden, why in DIRECTIONS
            for m in MODULES if _within(m, importers)
            for t, _, line in imports_of(m) if _within(t, forbidden)]


def test_import_directions() -> None:
    assert direction_offenders() == []


def storage_face_offenders() -> list[str]:
    """Every import, from outside ``jnrrd/storage/``, of a storage submodule or of a name the
    face does not offer: the rest of the package imports storage only through
    ``jnrrd.storage`` and the names of its ``__all__`` (docs/architecture.md, "The storage
    face")."""
    import jnrrd.storage

    face = set(jnrrd.storage.__all__)
    subs = {m.rsplit(".", 1)[1] for m in MODULES if m.startswith("jnrrd.storage.")}
    bad = [f"{m}:{line} imports {t} {name}".rstrip() for m in MODULES
           if not _within(m, ("jnrrd.storage",)) for t, name, line in imports_of(m)
           if t.startswith("jnrrd.storage.")
           or (t == "jnrrd.storage" and name and name not in face)]
    for m, (path, _) in MODULES.items():  # `from .. import storage`, then storage.remote.x
        if not _within(m, ("jnrrd.storage",)):
            bad += [f"{m}:{node.lineno} reads storage.{node.attr}"
                    for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.Attribute) and node.attr in subs
                    and isinstance(node.value, (ast.Name, ast.Attribute))
                    and (node.value.id if isinstance(node.value, ast.Name)
                         else node.value.attr) == "storage"]
    return bad


def test_storage_is_imported_only_through_its_face() -> None:
    # the walk names a storage submodule as such (how a reach past the face would show)
    assert any(t == "jnrrd.storage.local" for t, _, _ in imports_of("jnrrd.storage.resolve"))
    assert any(t == "jnrrd.storage" and n == "opened" for t, n, _ in imports_of("jnrrd.api"))
    assert storage_face_offenders() == []


def test_the_storage_face_names_no_submodule() -> None:
    # a face name equal to a submodule's (``resolve``) would be either, depending on what was
    # imported first, and an import of it would read as a reach past the face
    import jnrrd.storage

    submodules = {m.rsplit(".", 1)[1] for m in MODULES if m.startswith("jnrrd.storage.")}
    assert sorted(set(jnrrd.storage.__all__) & submodules) == []


def test_integrations_use_only_public_names() -> None:
    bad = []
    for m in MODULES:
        if not m.startswith("jnrrd.integrations"):
            continue
        for target, name, line in imports_of(m):
            if target.startswith("jnrrd.integrations"):
                continue
            hidden = [p for p in [*target.split(".")[1:], name] if p.startswith("_")]
            if hidden:
                bad.append(f"{m}:{line} imports {target} {name}".rstrip())
    assert bad == []


def test_integrations_read_no_private_attributes() -> None:
    # `vol._core` is as private as `from jnrrd.x import _y`: integrations use public API only
    bad = []
    for m, (path, _) in MODULES.items():
        if not m.startswith("jnrrd.integrations"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not node.attr.startswith("__") and not own:
                bad.append(f"{m}:{node.lineno} .{node.attr}")
    assert bad == []


def test_the_web_view_uses_public_names_and_the_threads_module() -> None:
    # jnrrd.web serves a volume through its public interface, as an integration would; its
    # threads come from jnrrd._threads, the one home of threads, and OS differences from
    # jnrrd._platform, the one home of those
    bad = []
    for m, (path, _) in MODULES.items():
        if not m.startswith("jnrrd.web"):
            continue
        for target, name, line in imports_of(m):
            hidden = [p for p in [*target.split(".")[1:], name] if p.startswith("_")]
            if hidden and target not in ("jnrrd._threads", "jnrrd._platform") \
                    and name not in ("_threads", "_platform"):
                bad.append(f"{m}:{line} imports {target} {name}".rstrip())
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))):
                bad.append(f"{m}:{node.lineno} .{node.attr}")
    assert bad == []


_THREAD_START = re.compile(r"\b(Thread|ThreadPoolExecutor|ProcessPoolExecutor)\(")


def test_threads_start_only_in_threads_module() -> None:
    bad = [f"{p.relative_to(ROOT.parent)}:{k}" for p, _ in MODULES.values()
           if p.name != "_threads.py"
           for k, line in enumerate(p.read_text().splitlines(), 1)
           if _THREAD_START.search(line.split("#", 1)[0])]
    assert bad == []


def test_modules_are_small() -> None:
    big = [f"{p.relative_to(ROOT.parent)}: {n} lines" for p, _ in MODULES.values()
           if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert big == []


def test_functions_are_short() -> None:
    long = []
    for p, _ in MODULES.values():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{p.relative_to(ROOT.parent)}:{node.lineno} {node.name}: {n}")
    assert long == []
