from __future__ import annotations

import subprocess
import sys

import pytest

from autotune.cli.main import build_parser, main

COMMANDS = ["run", "resume", "worker", "best", "trials", "export", "validate", "db", "db upgrade", "db current"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_for_every_command(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: autotune " + command), out[:200]


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("run", "resume", "worker", "best", "trials", "export", "validate", "db"):
        assert cmd in out


def test_python_dash_m_works() -> None:
    proc = subprocess.run([sys.executable, "-m", "autotune", "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("autotune "), proc.stderr


def test_parser_builds_without_heavy_imports() -> None:
    code = (
        "import sys; from autotune.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers', 'peft', 'optuna') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
    assert build_parser().prog == "autotune"
