"""The report's pure parts: the Pareto front, the peft snippet, the per-state time summary."""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

import pytest

from autotune.handoff.snippets import peft_snippet
from autotune.report.data import ReportData, pareto_front
from autotune.spec import parse_spec
from autotune.storage import StudyRow


def test_pareto_front_keeps_only_points_nothing_beats() -> None:
    pts = [(3.0, 1.0, 0), (1.0, 2.0, 1), (2.0, 1.5, 2), (2.5, 1.8, 3), (1.0, 2.5, 4), (4.0, 1.0, 5)]
    # (2.5, 1.8) is beaten by (2.0, 1.5); (1.0, 2.5) by (1.0, 2.0); (4.0, 1.0) costs more for the same score.
    assert pareto_front(pts) == [(1.0, 2.0, 1), (2.0, 1.5, 2), (3.0, 1.0, 0)]
    assert pareto_front([]) == []


def _spec(**over: Any) -> Any:
    base: dict[str, Any] = {"name": "s", "model": {"name": "tiny"}, "data": {"source": "builtin:smoke"}}
    return parse_spec({**base, **over})


@pytest.mark.parametrize("task", ["causal-lm", "seq-cls"])
def test_peft_snippet_is_the_best_commands_with_resolved_modules(task: str) -> None:
    """The report shows what `best --format peft` prints: the module names the trial wrapped
    (stored per trial), never the spec's preset, and searched alpha/dropout over the spec's."""
    spec = _spec(lora={"target_modules": "all-linear", "dropout": 0.0}, task=task)
    best = {
        "trial_number": 7,
        "score": 1.25,
        "params": {"rank": 16, "batch_size": 32, "learning_rate": 3e-4, "lora_alpha_ratio": 4.0, "lora_dropout": 0.1},
        "target_modules": ["q_proj", "v_proj"],
    }
    text = peft_snippet(spec.name, best, spec)
    assert "    r=16," in text
    assert "    lora_alpha=64," in text
    assert "    lora_dropout=0.1," in text
    assert "target_modules=['q_proj', 'v_proj']," in text
    assert ("CAUSAL_LM" if task == "causal-lm" else "SEQ_CLS") in text
    compile(text, "snippet", "exec")  # it is Python a user can paste
    from autotune.report.html import render

    now = dt.datetime.now(dt.UTC)
    study = StudyRow("s", "name: s\n", None, "0", now, now)
    row = {"trial_number": 7, "state": "complete", "score": 1.25, "wall_time_s": 1.0, **best["params"], **best}
    cols = ("val_loss", "train_loss", "accuracy", "peak_memory_mb", "error")
    page = render(ReportData(study, spec, None, [{**dict.fromkeys(cols), **row}], {}, best=best), [])
    shown = page.split('<pre id="peft-snippet">')[1].split("</pre>")[0]
    assert html.unescape(shown) == text  # the page shows exactly what `best --format peft` prints


def test_state_counts_and_compute_time() -> None:
    now = dt.datetime.now(dt.UTC)
    study = StudyRow("s", "name: s\n", None, "0", now, now)
    rows = [
        {"trial_number": 0, "state": "oom", "score": None, "wall_time_s": 1.0},
        {"trial_number": 1, "state": "complete", "score": 2.0, "wall_time_s": 10.0},
        {"trial_number": 2, "state": "complete", "score": 1.0, "wall_time_s": 5.0},
        {"trial_number": 3, "state": "pruned", "score": 3.0, "wall_time_s": 2.0},
        {"trial_number": 4, "state": "crashed", "score": None, "wall_time_s": None},
    ]
    data = ReportData(study, None, None, rows, {})
    assert data.state_counts() == [("complete", 2, 15.0), ("pruned", 1, 2.0), ("oom", 1, 1.0), ("crashed", 1, 0.0)]
    assert data.compute_s == 18.0
    assert len(data.complete) == 2


def test_report_names_the_bound_to_widen_when_the_best_sits_on_it() -> None:
    """The report says what `best` and the run summary say: the best lr is at the top of its range."""
    from autotune.report.html import render

    now = dt.datetime.now(dt.UTC)
    spec = _spec(search={"learning_rate": {"low": 1e-4, "high": 1e-3, "log": True}})
    study = StudyRow("s", "name: s\n", None, "0", now, now)
    params = {"rank": 8, "batch_size": 32, "learning_rate": 9.8e-4}
    best = {"trial_number": 0, "score": 1.0, "params": params, "target_modules": ["q_proj"]}
    cols = ("val_loss", "train_loss", "accuracy", "peak_memory_mb", "error")
    row = {"trial_number": 0, "state": "complete", "score": 1.0, "wall_time_s": 1.0, "params": params, **params}
    rows = [{**dict.fromkeys(cols), **row}]
    html = render(ReportData(study, spec, None, rows, {}, best=best), [])
    assert 'class="note edge">note: best learning_rate is at the highest end' in html
    assert "widen search.learning_rate to" in html
    inside = {**params, "learning_rate": 3e-4}
    html = render(ReportData(study, spec, None, rows, {}, best={**best, "params": inside}), [])
    assert "note edge" not in html
