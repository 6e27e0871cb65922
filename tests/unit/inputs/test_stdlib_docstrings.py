"""The built-in docstring dataset: the fast statement walk finds what ast.walk finds, in order."""

from __future__ import annotations

import ast
import gc
import textwrap
from pathlib import Path

from autotune.inputs import stdlib_docstrings as stdlib_data

SOURCE = textwrap.dedent(
    '''
    """Module docstring: never an example (only defs and classes are)."""

    def top():
        """Top-level function docstring, long enough."""
        def inner():
            """Nested function docstring, long enough."""
        return lambda: "a lambda body string that is no docstring"

    class Outer:
        """Class docstring, long enough to count."""
        x = "an assignment string that is no docstring at all"
        async def method(self):
            """Async method docstring, long enough."""

    if True:
        def in_if():
            """Function under an if, long enough."""
    else:
        def in_else():
            """Function under an else, long enough."""

    try:
        pass
    except ValueError:
        class InHandler:
            """Class in an except clause, long enough."""
    finally:
        def in_finally():
            """Function in a finally clause, long enough."""

    match 1:
        case 1:
            def in_case():
                """Function in a match case, long enough."""

    for _ in ():
        with open("x") as fh:
            def in_with():
                """Function under for and with, long enough."""

    def short():
        """Too short."""
    '''
)


def _reference(tree: ast.AST) -> list[str]:
    """The original extraction: every node through ast.walk."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= 20:
                out.append(" ".join(doc.split())[: stdlib_data._MAX_CHARS])
    return out


def test_statement_walk_matches_ast_walk_in_order(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(SOURCE)
    got = stdlib_data._docstrings(str(path))
    assert got == _reference(ast.parse(SOURCE))
    assert len(got) == 10  # every def above except `short`, breadth first
    assert got[0].startswith("Top-level")
    assert got[-1].startswith("Function under for and with")


def test_statement_walk_matches_ast_walk_on_real_stdlib_files() -> None:
    import asyncio
    import email

    for mod in (asyncio, email):
        for path in sorted(Path(mod.__file__ or "").parent.glob("*.py"))[:6]:
            assert stdlib_data._docstrings(str(path)) == _reference(ast.parse(path.read_text(encoding="utf-8")))


def test_build_restores_the_collector() -> None:
    stdlib_data._build.cache_clear()
    assert gc.isenabled()
    rows = stdlib_data._build()
    assert gc.isenabled()
    assert len(rows) > 1500
