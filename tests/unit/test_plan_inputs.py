"""CSV files as spreadsheets save them, paths relative to the spec, the data fingerprint, the
shell-quoted hint, and the run guard."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from autotune.cli.limits import parse_duration_s, parse_memory_mb
from autotune.errors import SpecError
from autotune.inputs.examples import load_examples
from autotune.inputs.fingerprint import check_fingerprint, data_fingerprint
from autotune.spec import load_spec
from autotune.study.guard import RunGuard
from autotune.study.summary import RunSummary, summary_line
from autotune.trial import TrialResult, TrialState
from tests.conftest import tiny_spec


def _load(path: Path, delimiter: str | None = None) -> list[dict[str, str]]:
    ex = load_examples(
        task="seq-cls",
        source=str(path),
        fmt="auto",
        text_field="text",
        text_pair_field=None,
        prompt_field=None,
        completion_field=None,
        label_field="label",
        validation=None,
        validation_fraction=0.2,
        max_examples=None,
        seed=0,
        delimiter=delimiter,
    )
    return ex.train + ex.validation


def test_csv_with_bom_reads_its_first_column(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufefftext,label\n".encode() + "".join(f"row {i},{i % 2}\n" for i in range(10)).encode())
    rows = _load(path)
    assert len(rows) == 10
    assert set(rows[0]) == {"text", "label"}


@pytest.mark.parametrize("delimiter", [None, ";"])
def test_semicolon_csv_is_sniffed_or_given(tmp_path: Path, delimiter: str | None) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("text;label\n" + "".join(f"row {i}, with a comma;{i % 2}\n" for i in range(10)), encoding="utf-8")
    rows = _load(path, delimiter)
    assert len(rows) == 10
    assert rows[0]["text"].startswith("row ")
    assert "," in rows[0]["text"]


def test_relative_paths_resolve_against_the_spec_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    spec = tiny_spec(name="rel", data={"source": "data/train.jsonl", "validation": "validation"})
    (tmp_path / "sub" / "spec.yaml").write_text(json.dumps(spec))
    monkeypatch.chdir("/")
    loaded = load_spec(tmp_path / "sub" / "spec.yaml")
    assert loaded.data.source == str(tmp_path / "sub" / "data" / "train.jsonl")
    assert loaded.data.validation == "validation"  # a split name, not a path
    assert loaded.model.name == "tiny"


def test_fingerprint_names_a_changed_file(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a"}\n')
    spec = load_spec_from(tmp_path, str(data))
    before = data_fingerprint(spec)
    check_fingerprint(before, data_fingerprint(spec), "s")  # unchanged: fine
    data.write_text('{"text": "b"}\n')
    with pytest.raises(SpecError, match="has changed since study 's' started"):
        check_fingerprint(before, data_fingerprint(spec), "s")


def load_spec_from(tmp_path: Path, source: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(tiny_spec(name="f", data={"source": source})))
    return load_spec(path)


def test_hint_is_shell_quoted() -> None:
    s = RunSummary("a;b", 1, 1, 1, False, 1.0)
    line = summary_line(s, "sqlite:///my dir/x.db")
    hint = line.split("see `", 1)[1].rstrip("`")
    assert shlex.split(hint) == ["autotune", "best", "a;b", "--storage", "sqlite:///my dir/x.db"]


def test_limits_parse() -> None:
    assert parse_duration_s("30m") == 1800
    assert parse_duration_s("90s") == 90
    assert parse_duration_s("2h") == 7200
    assert parse_memory_mb("20GiB") == 20 * 1024
    assert parse_memory_mb("512MB") == 512
    with pytest.raises(SpecError, match="--time-budget"):
        parse_duration_s("soon")


def test_run_limits_reach_parallel_workers_unchanged() -> None:
    """``resume --workers N --time-budget`` passes the limits on as ``autotune worker`` flags; they
    parse back to the same values and override the stored spec's budget."""
    from autotune.cli.limits import run_limits
    from autotune.cli.main import build_parser
    from autotune.spec import parse_spec
    from autotune.study.limits import RunLimits
    from autotune.study.parallel import _argv
    from tests.conftest import tiny_spec

    limits = RunLimits(study_time_s=1800.0, memory_limit_mb=20 * 1024.0)
    argv = _argv("s", 8, None, limits)
    args = build_parser().parse_args(argv[3:])
    assert run_limits(args) == limits
    spec = limits.apply(parse_spec(tiny_spec()))
    assert spec.budget.study_time_s == 1800.0 and spec.budget.memory_limit_mb == 20 * 1024.0
    assert RunLimits().argv() == [] and RunLimits().apply(spec) is spec


def test_guard_stops_on_the_third_identical_crash_only() -> None:
    g = RunGuard()
    crash = TrialResult(state=TrialState.CRASHED, error="RuntimeError: boom\ntraceback 1")
    other = TrialResult(state=TrialState.CRASHED, error="ValueError: other")
    for r in (crash, crash, other, crash, crash):
        g.observe(r)
    assert g.stop is None
    g.observe(TrialResult(state=TrialState.CRASHED, error="RuntimeError: boom\ntraceback 2"))
    assert g.stop is not None
    assert g.stop.exit_code == 3
    assert "RuntimeError: boom" in g.stop.reason
    g2 = RunGuard()
    g2.observe(TrialResult(state=TrialState.CRASHED, error="lora.target_modules: no module", spec_error=True))
    assert g2.stop is not None
    assert g2.stop.exit_code == 2
