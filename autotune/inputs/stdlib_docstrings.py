"""A real text-classification dataset that needs no download: docstrings of the installed Python
standard library, labelled by the package they come from.

Built deterministically from source with ``ast`` (nothing is imported or executed): files are
walked in sorted order and every function or class docstring of 20+ characters becomes one
example. About 1,900 examples over 8 labels on CPython 3.11; chance accuracy is 1/8.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import functools
import gc
import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

from autotune.paths import cache_root

PACKAGES = ("asyncio", "email", "http", "importlib", "logging", "multiprocessing", "unittest", "xml")
_SKIP_DIRS = {"test", "tests", "__pycache__", "idle_test"}
_MAX_CHARS = 400
_FORMAT = 1  # the first 400 characters carry the summary; longer ones only cost tokens


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# The fields of a node that hold statements (or except/match clauses, which hold statements): the
# only places a def can sit. On CPython 3.11 that is 36k visits instead of ast.walk's 266k.
_BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _docstrings(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (SyntaxError, UnicodeDecodeError, OSError):
        return []
    out = []
    # Breadth first, like ast.walk, so the examples keep the order they have always had.
    queue: collections.deque[ast.AST] = collections.deque([tree])
    while queue:
        node = queue.popleft()
        for field in _BODY_FIELDS:
            queue.extend(getattr(node, field, ()))
        if isinstance(node, _DEFS):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= 20:
                out.append(" ".join(doc.split())[:_MAX_CHARS])
    return out


def package_docstrings(base: str) -> list[str]:
    """Every docstring of 20+ characters in the package directory ``base``, files in sorted order,
    test directories skipped (also bench/pkgdocs_data.py's source, on other packages)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in sorted(os.walk(base)):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(".py"):
                out.extend(_docstrings(os.path.join(dirpath, name)))
    return out


@functools.cache
def _build() -> tuple[tuple[str, str], ...]:
    root = sysconfig.get_paths()["stdlib"]
    rows: list[tuple[str, str]] = []
    # The syntax trees hold no reference cycles, yet the ~270k nodes they allocate set off full
    # collections of everything the process has imported: 0.25 s each once torch is loaded
    # (bench/overhead.py notes). Reference counting frees the trees; the collector has no work.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for pkg in PACKAGES:
            rows.extend((text, pkg) for text in package_docstrings(os.path.join(root, pkg)))
    finally:
        if gc_was_on:
            gc.enable()
    return tuple(rows)


def _cache_path() -> Path:
    # Keyed by everything that shapes the result: the Python build, where its stdlib lies, the
    # packages and the cut. Parsing ~200 files takes about 0.6 s; reading this file, milliseconds.
    key = hashlib.sha256(
        repr((_FORMAT, sys.version, sysconfig.get_paths()["stdlib"], PACKAGES, _MAX_CHARS)).encode()
    ).hexdigest()[:16]
    return cache_root() / "data" / f"stdlib-docstrings-{key}.json"


@functools.cache
def _cached() -> tuple[tuple[str, str], ...]:
    path = _cache_path()
    with contextlib.suppress(OSError, ValueError):
        return tuple((t, lab) for t, lab in json.loads(path.read_text(encoding="utf-8")))
    rows = _build()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rows), encoding="utf-8")
        os.replace(tmp, path)  # atomic: concurrent workers never read half a file
    return rows


def stdlib_docstrings() -> list[dict[str, Any]]:
    return [{"text": text, "label": label} for text, label in _cached()]
