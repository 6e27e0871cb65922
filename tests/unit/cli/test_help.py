from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from autotune.cli.main import build_parser, main

COMMANDS = [
    "run",
    "resume",
    "worker",
    "best",
    "trials",
    "studies",
    "init",
    "export",
    "report",
    "train",
    "estimate",
    "validate",
    "db",
    "db upgrade",
    "db current",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_for_every_command(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: autotune " + command), out[:200]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_parser_has_exactly_the_documented_commands() -> None:
    top = _subcommands(build_parser())
    assert sorted(top) == sorted(c for c in COMMANDS if " " not in c)
    assert sorted(_subcommands(top["db"])) == ["current", "upgrade"]


def test_top_level_help_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    listed = out.split("COMMAND", 2)[-1]  # the subcommand list, after the usage line's metavar
    for cmd in _subcommands(build_parser()):
        assert f"\n    {cmd} " in listed, f"{cmd} missing from:\n{listed}"


def test_python_dash_m_works() -> None:
    proc = subprocess.run([sys.executable, "-m", "autotune", "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("autotune "), proc.stderr


def test_parser_builds_without_heavy_imports() -> None:
    code = (
        "import sys; from autotune.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers', 'peft', 'optuna') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
    assert build_parser().prog == "autotune"
