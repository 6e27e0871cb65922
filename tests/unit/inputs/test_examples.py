"""Each data format and field layout, label mapping, validation splits, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autotune.errors import DataError
from autotune.inputs.examples import load_examples


def _load(source: Path | str, task: str = "causal-lm", **kw: Any) -> Any:
    args: dict[str, Any] = dict(
        task=task,
        source=str(source),
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
    )
    args.update(kw)
    return load_examples(**args)


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_jsonl_text(tmp_path: Path) -> None:
    ex = _load(_jsonl(tmp_path / "d.jsonl", [{"text": f"line {i}"} for i in range(10)]))
    assert len(ex.train) == 8
    assert len(ex.validation) == 2
    assert ex.labels is None
    assert {r["text"] for r in ex.train + ex.validation} == {f"line {i}" for i in range(10)}


def test_validation_fraction_is_seeded(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "d.jsonl", [{"text": f"line {i}"} for i in range(50)])
    a, b, c = _load(path, seed=1), _load(path, seed=1), _load(path, seed=2)
    assert a.validation == b.validation
    assert a.validation != c.validation


def test_csv_classification_with_string_labels(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("text,label\n" + "".join(f"row {i},{'spam' if i % 2 else 'ham'}\n" for i in range(10)))
    ex = _load(path, task="seq-cls")
    assert ex.labels == ("ham", "spam")  # sorted: the id of a label does not depend on row order


def test_text_pairs_and_separate_validation_file(tmp_path: Path) -> None:
    rows = [{"q": f"q{i}", "a": f"a{i}", "label": i % 3} for i in range(9)]
    train, val = _jsonl(tmp_path / "t.jsonl", rows), _jsonl(tmp_path / "v.jsonl", rows[:3])
    ex = _load(train, task="seq-cls", text_field="q", text_pair_field="a", validation=str(val))
    assert len(ex.train) == 9
    assert len(ex.validation) == 3
    assert ex.labels == ("0", "1", "2")


def test_plain_text_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "d.txt"
    path.write_text("first para\nstill first\n\nsecond\n\nthird\n\nfourth\n\nfifth\n")
    ex = _load(path)
    assert sorted(r["text"] for r in ex.train + ex.validation) == sorted(
        ["first para\nstill first", "second", "third", "fourth", "fifth"]
    )


def test_prompt_completion_fields(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "d.jsonl", [{"prompt": f"Q{i}", "completion": f"A{i}"} for i in range(5)])
    ex = _load(path, prompt_field="prompt", completion_field="completion")
    assert len(ex.train) == 4


def test_builtin_stdlib_docstrings_is_deterministic() -> None:
    a = _load("builtin:stdlib-docstrings", task="seq-cls", validation_fraction=0.15)
    b = _load("builtin:stdlib-docstrings", task="seq-cls", validation_fraction=0.15)
    assert a == b
    assert a.labels is not None
    assert len(a.labels) == 8
    assert len(a.train) + len(a.validation) > 1500


@pytest.mark.parametrize(
    ("setup", "kw", "expected"),
    [
        (lambda p: None, {}, "no such file or directory"),
        (lambda p: None, {"source": "data/missing/train.jsonl"}, "no such file or directory"),
        (lambda p: p.write_text('{"txt": "a"}\n' * 5), {}, "missing column 'text'"),
        (lambda p: p.write_text(""), {}, "no examples"),
        (lambda p: p.write_text('{"text": "a"}\n{"text": \n'), {}, "invalid JSON on line 2"),
        (lambda p: p.write_text('{"text": "a"}\n{"text": "  "}\n'), {}, "row 2 has an empty 'text'"),
        (lambda p: p.write_text('{"text": "a"}\n'), {}, "too few to hold out"),
        (lambda p: p.write_text('{"text": "a", "label": "x"}\n' * 5), {"task": "seq-cls"}, "1 distinct label"),
        (lambda p: p.write_text('{"text": "a"}\n' * 5), {"validation": "/no/such/val.jsonl"}, "no such file"),
    ],
)
def test_bad_data_is_one_clear_line(tmp_path: Path, setup: Any, kw: dict[str, Any], expected: str) -> None:
    path = tmp_path / "data.jsonl"
    setup(path)
    with pytest.raises(DataError) as err:
        _load(kw.pop("source", path), **kw)
    assert expected in str(err.value), str(err.value)
    assert "\n" not in str(err.value), str(err.value)


def test_unknown_builtin() -> None:
    with pytest.raises(DataError, match="unknown built-in dataset 'nope'"):
        _load("builtin:nope")


def test_a_csv_whose_quoted_fields_hold_commas_reads_as_written(tmp_path: Path) -> None:
    """The sniffer guesses only the delimiter: its quoting guess from a sample once split such
    fields into an extra, nameless column (found by `autotune init` on csv.DictWriter output)."""
    import csv as _csv

    from autotune.inputs.examples import read_rows

    rows = [{"label": f"l{i % 3}", "text": f'"Quoted", then, commas {i}; and "more"'} for i in range(50)]
    path = tmp_path / "q.csv"
    with path.open("w", newline="") as fh:
        w = _csv.DictWriter(fh, fieldnames=["label", "text"])
        w.writeheader()
        w.writerows(rows)
    assert read_rows(str(path)) == rows
