"""A second real text-classification task for bench/end_to_end.py, out of sample for the search's
design (issue 20: "a seq-cls task with another model or data; not the quickstart's data again").

Docstrings of six installed third-party packages, labelled by package: graphs (networkx), arrays
(numpy), syntax highlighting (pygments), databases (sqlalchemy), symbolic maths (sympy) and async
I/O (trio). The quickstart's data is the standard library's; none of these texts is in it. Built
with the quickstart's own walk, autotune.inputs.stdlib_docstrings.package_docstrings (sorted, ast
only, nothing imported), then 320 drawn per package with a fixed seed, so the classes are
balanced (chance 1/6) and the size is the quickstart's (~1,900 examples).

The file is committed (bench/data/pkgdocs.jsonl) with the package versions it was built from
(bench/data/pkgdocs.versions.json), since another install gives other docstrings. The spec beside
it, bench/specs/pkgdocs.yaml, is what `autotune init` drafts from this file, with one edit made
before any run (max_length 144 cut to the quickstart's 48, for time; the spec says so), so that
no choice in it was made by looking at results.

Run: python bench/pkgdocs_data.py
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import random
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from autotune.inputs import stdlib_docstrings  # noqa: E402

PACKAGES = ("networkx", "numpy", "pygments", "sqlalchemy", "sympy", "trio")
PER_LABEL = 320
SEED = 0
OUT = REPO / "bench" / "data" / "pkgdocs.jsonl"


def package_docstrings(pkg: str) -> list[str]:
    docs = stdlib_docstrings.package_docstrings(os.path.join(sysconfig.get_paths()["purelib"], pkg))
    return list(dict.fromkeys(docs))  # a docstring copied between modules is one example


def main() -> None:
    rng = random.Random(SEED)
    rows: list[dict[str, str]] = []
    for pkg in PACKAGES:
        docs = package_docstrings(pkg)
        rows.extend({"text": t, "label": pkg} for t in rng.sample(docs, min(PER_LABEL, len(docs))))
    rng.shuffle(rows)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    versions = {pkg: importlib.metadata.version(pkg) for pkg in PACKAGES}
    versions["python"] = sys.version.split()[0]
    OUT.with_suffix(".versions.json").write_text(json.dumps(versions, indent=2) + "\n")
    print(f"{OUT.relative_to(REPO)}: {len(rows)} examples, {len(PACKAGES)} labels, {versions}")


if __name__ == "__main__":
    main()
