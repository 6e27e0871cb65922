"""The package's own import graph, at one or more git revisions: how many nodes, arrows, floors
and circles, counted the same way each time (issue 19's table).

How it counts:
- every import statement of ``autotune/**/*.py`` and ``bench/*.py`` counts, those inside
  functions too; migrations and ``tests/`` are left out;
- a node is a module directly in ``autotune/`` (``__init__`` and ``__main__`` included) or a
  sub-package folder, counted as one node; ``bench/`` is one more node;
- an arrow is "node A imports something of node B" (A != B), counted once per pair;
- circles: sets of nodes that import each other in a loop (strongly connected components of more
  than one node), plus loops between the files inside one package;
- floors: the longest import chain, with each circle collapsed to one step (floor 1 imports nothing
  of autotune); ``arrows_in_circles`` counts the arrows that cannot point down because they close
  a circle.

Run: python bench/import_graph.py REV [REV ...]   (``WORKTREE`` for the files on disk)
Writes bench/results/import_graph.json and prints one line per revision.
"""

from __future__ import annotations

import ast
import itertools
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def _sources(rev: str) -> dict[str, str]:
    """path -> source of every counted file at ``rev``."""
    if rev == "WORKTREE":
        paths = [str(p.relative_to(REPO)) for top in ("autotune", "bench") for p in (REPO / top).rglob("*.py")]
        return {p: (REPO / p).read_text() for p in paths if "migrations" not in p}
    paths = [p for p in _git("ls-tree", "-r", "--name-only", rev, "autotune", "bench").split() if p.endswith(".py")]
    paths = [p for p in paths if "migrations" not in p]
    return {
        p: subprocess.run(["git", "show", f"{rev}:{p}"], cwd=REPO, capture_output=True, text=True).stdout for p in paths
    }


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def _module(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _edges(src: dict[str, str]) -> set[tuple[str, str]]:
    mods = {_module(p) for p in src}
    out = set()
    for path, text in src.items():
        me = _module(path)
        for n in ast.walk(ast.parse(text)):
            targets: list[str] = []
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                targets = [f"{n.module}.{a.name}" if f"{n.module}.{a.name}" in mods else n.module for a in n.names]
            for t in targets:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != me and t.split(".")[0] == "autotune":
                    out.add((me, t))
    return out


def _node(module: str, packages: set[str]) -> str:
    parts = module.split(".")
    if parts[0] == "bench":
        return "bench/"
    if len(parts) == 1:
        return "autotune/__init__"
    return f"{parts[1]}/" if f"autotune.{parts[1]}" in packages else parts[1]


def _components(nodes: set[str], arrows: set[tuple[str, str]]) -> list[set[str]]:
    graph = {n: sorted(b for a, b in arrows if a == n) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = itertools.count()

    def visit(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10_000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def figures(rev: str) -> dict[str, object]:
    src = _sources(rev)
    packages = {_module(p) for p in src if p.endswith("/__init__.py") and p.count("/") == 2}
    edges = _edges(src)
    nodes = {_node(_module(p), packages) for p in src}
    arrows = {(_node(a, packages), _node(b, packages)) for a, b in edges}
    arrows = {(a, b) for a, b in arrows if a != b}
    comps = _components(nodes, arrows)
    comp_of = {n: i for i, c in enumerate(comps) for n in c}
    floor: dict[int, int] = {}
    for i, _ in enumerate(comps):  # Tarjan emits a component after everything it imports
        below = [floor[comp_of[b]] for a, b in arrows if comp_of[a] == i and comp_of[b] != i]
        floor[i] = 1 + max(below, default=0)
    circles = [sorted(c) for c in comps if len(c) > 1]
    inner = []
    for pkg in sorted(packages):
        files = {_module(p) for p in src if _module(p) == pkg or _module(p).startswith(pkg + ".")}
        local = {(a, b) for a, b in edges if a in files and b in files}
        inner += [sorted(c) for c in _components(files, local) if len(c) > 1]
    flat = sorted(p for p in src if p.startswith("autotune/") and p.count("/") == 1)
    return {
        "rev": rev
        if rev == "WORKTREE"
        else subprocess.run(
            ["git", "rev-parse", "--short", rev], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
        "flat_modules": len(flat),
        "sub_packages": len(packages),
        "nodes": len(nodes),
        "arrows": len(arrows),
        "floors": max(floor.values()),
        "arrows_in_circles": sum(1 for a, b in arrows if comp_of[a] == comp_of[b]),
        "circles": len(circles) + len(inner),
        "circle_members": circles + inner,
        "library_imports_of_cli": sorted(
            f"{a} -> {b}"
            for a, b in edges
            if b.startswith("autotune.cli") and not a.startswith(("autotune.cli", "autotune.__main__"))
        ),
    }


def main(argv: list[str]) -> None:
    revs = argv or ["HEAD"]
    rows = [figures(r) for r in revs]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "import_graph.json").write_text(json.dumps(rows, indent=2) + "\n")
    for r in rows:
        cli = r["library_imports_of_cli"]
        assert isinstance(cli, list)
        print(
            f"{r['rev']}: flat_modules={r['flat_modules']} nodes={r['nodes']} arrows={r['arrows']} "
            f"floors={r['floors']} arrows_in_circles={r['arrows_in_circles']} circles={r['circles']} "
            f"cli_imports={len(cli)}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
