"""Fixtures shared by the report tests: one real smoke-shaped study and its report per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import tiny_spec


@pytest.fixture(scope="package")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The smoke study's shape (tiny model, ASHA), run for real through the CLI, and its report."""
    import yaml

    from autotune.cli.main import main

    tmp = tmp_path_factory.mktemp("smoke")
    spec = tmp / "smoke.yaml"
    spec.write_text(yaml.safe_dump(tiny_spec(name="smoke", pruner="asha", budget={"evals": 3}, n_trials=5)))
    url = f"sqlite:///{tmp / 'smoke.db'}"
    assert main(["run", str(spec), "--storage", url, "--no-progress"]) == 0
    out = tmp / "report.html"
    assert main(["report", "smoke", "--storage", url, "--out", str(out), "--png", str(tmp / "png")]) == 0
    return url, tmp
