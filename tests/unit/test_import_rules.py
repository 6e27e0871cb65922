"""The import rules of docs/architecture.md ("Layers" and "Import rules"), checked on the source.

Every import counts, those inside functions too: a lazy import still ties two modules together.
- autotune's units (a top-level module, or a package counted as one) stand on layers; a module
  imports its own package or a unit on a strictly lower layer, never one beside or above it;
- inside a package, files import each other in no circle, by full path, never through the
  package's own ``__init__`` (its face, where it has one);
- library code never imports ``autotune.cli``, and nothing under ``autotune/`` imports ``bench``;
- the worker never imports optuna or storage; torch, transformers and peft load at module level
  only in the worker and the calibration probe; optuna at module level only where it searches.
The layers are written once, in docs/architecture.md; this test reads them from there.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

PKG = REPO / "autotune"
DOC = REPO / "docs" / "architecture.md"
SOURCES = sorted(p for p in PKG.rglob("*.py") if "migrations" not in p.parts)
MODULES = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p for p in SOURCES}


def _layers_from_doc() -> list[set[str]]:
    """``layer N  a/, b.py, c/`` lines of the doc's layer block, bottom (0) to top."""
    found: dict[int, set[str]] = {}
    for m in re.finditer(r"^layer (\d+)\s+(.+)$", DOC.read_text(), re.MULTILINE):
        found[int(m.group(1))] = {u.strip().removesuffix("/").removesuffix(".py") for u in m.group(2).split(",")}
    assert found and sorted(found) == list(range(len(found))), f"{DOC.name}: no layer block 0..N"
    return [found[k] for k in sorted(found)]


LAYERS = _layers_from_doc()
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """``autotune.study.driver`` -> ``study``; ``autotune`` (its ``__version__``) -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, imported autotune module, at module level) for every import of autotune in ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("autotune", "bench"):
                    yield node.lineno, a.name, id(node) in top
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.relative_to(REPO)}:{node.lineno}: a relative import; use the full path"
            mod = node.module or ""
            if mod.split(".")[0] not in ("autotune", "bench"):
                continue
            for a in node.names:  # `from autotune.study import setup` imports the module study.setup
                sub = f"{mod}.{a.name}"
                yield node.lineno, sub if sub in MODULES else mod, id(node) in top


def _module_of(path: Path) -> str:
    return next(m for m, p in MODULES.items() if p == path)


def _rel(path: Path) -> str:
    return str(path.relative_to(PKG))


def test_every_unit_has_a_layer() -> None:
    units = {_unit(m) for m in MODULES}
    assert units - set(LAYER) == set(), f"units missing from the layer block of {DOC.name}"
    assert set(LAYER) - units == set(), f"{DOC.name} names units the package does not have"


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_imports_run_down_the_layers(path: Path) -> None:
    src = _unit(_module_of(path))
    bad = []
    for line, mod, _ in _imports(path):
        if mod.split(".")[0] == "bench":
            bad.append(f"{line}: {mod} (nothing under autotune/ imports bench)")
            continue
        dst = _unit(mod)
        if dst != src and LAYER[dst] >= LAYER[src]:
            where = "beside" if LAYER[dst] == LAYER[src] else "above"
            bad.append(f"{line}: {mod} (layer {LAYER[dst]}, {where} {src} on layer {LAYER[src]})")
    assert not bad, f"{_rel(path)} imports sideways or up ({DOC.name}, Layers):\n" + "\n".join(bad)


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_library_never_imports_cli(path: Path) -> None:
    src = _module_of(path)
    if src.startswith("autotune.cli") or src == "autotune.__main__":
        return
    bad = [f"{line}: {mod}" for line, mod, _ in _imports(path) if mod.startswith("autotune.cli")]
    assert not bad, f"{_rel(path)} (library code) imports the CLI: {bad}"


def _package_edges(package: str) -> dict[str, set[str]]:
    inside = {m for m in MODULES if m.startswith(package + ".") or m == package}
    edges: dict[str, set[str]] = {m: set() for m in inside}
    for m in inside:
        edges[m] = {mod for _, mod, _ in _imports(MODULES[m]) if mod in inside and mod != m}
    return edges


PACKAGES = sorted(m for m, p in MODULES.items() if p.name == "__init__.py" and m != "autotune")


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_inside_a_package(package: str) -> None:
    edges = _package_edges(package)
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n] if n in path else [*path, n]
            if n not in state and (loop := visit(n, [*path, n])):
                return loop
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state and (loop := visit(m, [m])):
            pytest.fail(f"import circle in {package}: {' -> '.join(loop)}")


@pytest.mark.parametrize("package", PACKAGES)
def test_siblings_import_each_other_by_full_path(package: str) -> None:
    """A module inside a package never imports the package's face (its ``__init__``): the face
    imports the modules, so the two would import each other."""
    bad = [
        f"{_rel(MODULES[m])}:{line}"
        for m in MODULES
        if m.startswith(package + ".")
        for line, mod, _ in _imports(MODULES[m])
        if mod == package
    ]
    assert not bad, f"these import {package} through its __init__: {bad}"


@pytest.mark.parametrize("path", sorted((PKG / "worker").glob("*.py")), ids=lambda p: p.name)
def test_worker_never_imports_optuna_or_storage(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    bad = sorted(m for m in imported if m.split(".")[0] == "optuna" or m.startswith("autotune.storage"))
    assert not bad, f"{path.name} imports {bad}"


def _module_level_third_party(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:  # module level only: lazy imports inside functions are the point
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


# Where a heavy library may load when the module is imported; everywhere else it is imported
# inside the function that needs it, so `best`, `trials`, `export`, `report` and `--help` stay
# instant on a machine without a GPU stack, and so does importing the driver.
TORCH_AT_IMPORT = ("worker/", "costs/probe.py")
OPTUNA_AT_IMPORT = ("search/", "study/", "testing/", "optuna_private.py")


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_heavy_libraries_load_only_where_they_are_the_point(path: Path) -> None:
    rel = _rel(path)
    imported = _module_level_third_party(path)
    if not rel.startswith(TORCH_AT_IMPORT):
        heavy = imported & {"torch", "transformers", "peft"}
        assert not heavy, f"{rel} imports {sorted(heavy)} at module level"
    if not rel.startswith(OPTUNA_AT_IMPORT):
        assert "optuna" not in imported, f"{rel} imports optuna at module level"
