"""The import rules of docs/architecture.md, checked on the source: the worker never imports optuna or storage;
the CLI and storage never import torch, transformers or peft at module level."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PKG = REPO / "autotune"


def _module_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:  # module level only: lazy imports inside functions are the point
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] if not a.name.startswith("autotune") else a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module if node.module.startswith("autotune") else node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((PKG / "worker").glob("*.py")), ids=lambda p: p.name)
def test_worker_never_imports_optuna_or_storage(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    bad = sorted(m for m in imported if m.split(".")[0] == "optuna" or m.startswith("autotune.storage"))
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize(
    "path",
    sorted(
        [
            *(PKG / "cli").glob("*.py"),
            *(PKG / "storage").glob("*.py"),
            *(PKG / "report").glob("*.py"),
            # best --format peft|spec renders with answer.py; train checks its inputs before torch loads
            PKG / "answer.py",
            PKG / "train.py",
            PKG / "train_output.py",
        ]
    ),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_cli_and_storage_import_no_torch_at_module_level(path: Path) -> None:
    heavy = _module_level_imports(path) & {"torch", "transformers", "peft"}
    assert not heavy, f"{path.name} imports {sorted(heavy)} at module level"
