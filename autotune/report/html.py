"""One self-contained HTML file: figures as base64 PNG, styles inline, no script at all.

Everything from the database (study name, spec YAML, params, error messages) passes through
jinja2 with autoescape on, so markup in it shows as text. The Content-Security-Policy meta tag is
a second lock: the page allows no script and loads nothing but its own data: images, so even a
missed escape could not run code or fetch anything when someone opens a report they were sent.
"""

from __future__ import annotations

import base64
from typing import Any

import jinja2

from autotune.handoff.snippets import peft_snippet
from autotune.report.data import ReportData, cost_points, finite, pareto_front
from autotune.report.figures import FIG_H_PX, FIG_W_PX, Figure
from autotune.search.bounds import find_edges
from autotune.spec import ParamRange, searched_params

ERROR_SUMMARY_CHARS = 120  # first line of an error in the table; the full text is in its tooltip
ERROR_TOOLTIP_CHARS = 2000  # bounds the file for 1,000 crashed trials with long tracebacks

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>autotune report: {{ study }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; } td, th { padding: 2px 8px; border-bottom: 1px solid #eee; }
th { text-align: left; background: #f6f6f6; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; } .note { color: #8a5a00; font-style: italic; }
.banner { background: #fff3e0; border: 1px solid #e0a040; padding: .6em; }
img.figure { width: 100%; max-width: {{ fig_w }}px; height: auto; }
.state-complete { color: #1f77b4; } .state-pruned { color: #c76a00; } .state-failed { color: #b00020; }
</style>
</head>
<body>
<h1>autotune report: <span id="study-name">{{ study }}</span></h1>
<p>autotune {{ version }} &middot; created {{ created }} &middot; updated {{ updated }}</p>
{% if no_complete %}<p class="banner" id="no-complete">No trial completed: all {{ n_trials }} trial(s) ended as
 {{ failed_summary }}. The figures below show what the failures left.</p>{% endif %}

<h2 id="summary">Study</h2>
{% if spec_rows %}<table>{% for k, v in spec_rows %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>
{% else %}<p class="note">{{ spec_error }}</p>{% endif %}
<details><summary>stored spec (YAML)</summary><pre>{{ spec_yaml }}</pre></details>

<h3>Trials by state</h3>
<table><tr><th>state</th><th>trials</th><th>compute time</th></tr>
{% for s, n, secs in states %}<tr><td>{{ s }}</td><td class="n">{{ n }}</td><td class="n">{{ secs }}</td></tr>
{% endfor %}
<tr><th>total</th><th class="n">{{ n_trials }}</th><th class="n">{{ total_time }}</th></tr></table>

<h3>Best trial</h3>
{% if best %}<table>{% for k, v in best %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>
{% for e in edges %}<p class="note edge">note: {{ e }}</p>{% endfor %}
{% if snippet %}<p>As a peft config:</p><pre id="peft-snippet">{{ snippet }}</pre>{% endif %}
{% else %}<p class="note">no complete trial</p>{% endif %}

{% for f in figures %}<h2 id="{{ f.name }}">{{ f.title }}</h2>
{% if f.src %}<img class="figure" id="fig-{{ f.name }}" alt="{{ f.title }}" width="{{ fig_w }}" height="{{ fig_h }}"
 src="{{ f.src }}">{% else %}<p class="note">{{ f.note }}</p>{% endif %}
{% if f.name == "cost" and fronts %}{% for label, rows in fronts %}<h3>Pareto front: {{ label }}</h3>
<table><tr><th>trial</th><th>{{ label }}</th><th>score</th></tr>
{% for c, s, n in rows %}<tr><td class="n">{{ n }}</td><td class="n">{{ "%.4g"|format(c) }}</td>
<td class="n">{{ "%.5g"|format(s) }}</td></tr>{% endfor %}</table>{% endfor %}{% endif %}
{% endfor %}

<h2 id="trials">Trials</h2>
<table id="trial-table"><tr>{% for c in columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in rows %}<tr><td class="n">{{ r.n }}</td><td class="state-{{ r.css }}">{{ r.state }}</td>
{% for v in r.cells %}<td class="n">{{ v }}</td>{% endfor %}<td>{{ r.extra }}</td>
<td title="{{ r.error_full }}">{{ r.error }}</td></tr>
{% endfor %}</table>
</body>
</html>
"""

_env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
_template = _env.from_string(TEMPLATE)

COLUMNS = (
    "trial",
    "state",
    "rank",
    "batch",
    "learning rate",
    "score",
    "val loss",
    "train loss",
    "accuracy",
    "time (s)",
    "memory (MB)",
    "other params",
    "error",
)


def _fmt(v: Any, spec: str = ".5g") -> str:
    f = finite(v) if isinstance(v, (int, float)) else None
    return "" if f is None else format(f, spec)


def duration(secs: float) -> str:
    if secs < 120:
        return f"{secs:.1f} s"
    if secs < 7200:
        return f"{secs / 60:.1f} min"
    return f"{secs / 3600:.2f} h"


def _range(v: ParamRange) -> str:
    if v.choices is not None:
        return ", ".join(f"{c:g}" for c in v.choices)
    return f"{v.low:g} .. {v.high:g}" + (" (log)" if v.log else "")


def _modules(tm: str | list[str]) -> str:
    return tm if isinstance(tm, str) else ", ".join(tm)


def _spec_rows(data: ReportData) -> list[tuple[str, str]]:
    s = data.spec
    if s is None:
        return []
    search = "; ".join(f"{k}: {_range(v)}" for k, v in searched_params(s))
    data_src = s.data.source + (f" (max {s.data.max_examples} examples)" if s.data.max_examples else "")
    return [
        ("model", s.model.name),
        ("task", s.task),
        ("data", data_src),
        (
            "LoRA",
            f"target modules {_modules(s.lora.target_modules)}, alpha {s.lora.alpha_ratio:g} x rank, "
            f"dropout {s.lora.dropout:g}",
        ),
        ("search", search),
        ("budget", f"{s.budget.train_examples} training examples per trial, {s.budget.evals} evaluations"),
        ("sampler", s.sampler.name),
        ("pruner", s.pruner.name),
        ("objective", f"{s.objective.val_weight:g} x val_loss + {s.objective.train_weight:g} x train_loss"),
        ("trials asked", str(s.n_trials)),
    ]


def _best_rows(best: dict[str, Any]) -> list[tuple[str, str]]:
    out = [("trial", str(best["trial_number"])), ("score", _fmt(best["score"]))]
    out += [(k, _fmt(v) if isinstance(v, float) else str(v)) for k, v in best["params"].items()]
    for key in ("val_loss", "train_loss", "accuracy", "wall_time_s", "peak_memory_mb", "device", "precision"):
        v = best.get(key)
        if v is not None:
            out.append((key, _fmt(v) if isinstance(v, float) else str(v)))
    return out


def _table_rows(data: ReportData) -> list[dict[str, Any]]:
    main = {"rank", "batch_size", "learning_rate"}
    rows = []
    for t in data.trials:
        err = (t.get("error") or "").strip()
        state = t["state"]
        extra = {k: v for k, v in (t["params"] or {}).items() if k not in main}
        rows.append(
            {
                "n": t["trial_number"],
                "state": state,
                "css": state if state in ("complete", "pruned") else "failed",
                "cells": [
                    "" if t["rank"] is None else t["rank"],
                    "" if t["batch_size"] is None else t["batch_size"],
                    _fmt(t["learning_rate"], ".3g"),
                    _fmt(t["score"]),
                    _fmt(t["val_loss"]),
                    _fmt(t["train_loss"]),
                    _fmt(t["accuracy"], ".3f"),
                    _fmt(t["wall_time_s"], ".1f"),
                    _fmt(t["peak_memory_mb"], ".1f"),
                ],
                "extra": ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in extra.items()),
                "error": (err.splitlines() or [""])[0][:ERROR_SUMMARY_CHARS],
                "error_full": err[:ERROR_TOOLTIP_CHARS],
            }
        )
    return rows


def _edge_notes(data: ReportData) -> list[str]:
    """The edge-of-range notes `best` prints: the best value at a bound the user may widen."""
    if data.best is None or data.spec is None:
        return []
    return [e.message() for e in find_edges(data.best["params"], data.spec)]


def render(data: ReportData, figures: list[Figure]) -> str:
    complete = data.complete
    failed = [(s, n) for s, n, _ in data.state_counts() if s != "complete"]
    best = data.best
    # the snippet `autotune best --format peft` prints: the trial's resolved target modules
    snippet = peft_snippet(data.spec.name, best, data.spec) if best is not None and data.spec is not None else None
    figs = [
        {
            "name": f.name,
            "title": f.title,
            "note": f.note or "",
            "src": "data:image/png;base64," + base64.b64encode(f.png).decode("ascii") if f.png else "",
        }
        for f in figures
    ]
    fronts = []
    for key, label in (("wall_time_s", "wall time (s)"), ("peak_memory_mb", "peak memory (MB)")):
        front = pareto_front(cost_points(complete, key))
        if front:
            fronts.append((label, front))
    return _template.render(
        study=data.study.study_name,
        version=data.study.autotune_version,
        created=f"{data.study.created_at:%Y-%m-%d %H:%M}",
        updated=f"{data.study.updated_at:%Y-%m-%d %H:%M}",
        no_complete=not complete,
        n_trials=len(data.trials),
        failed_summary=", ".join(f"{s} ({n})" for s, n in failed),
        spec_rows=_spec_rows(data),
        spec_error=data.spec_error or "",
        spec_yaml=data.study.spec_yaml,
        states=[(s, n, duration(secs)) for s, n, secs in data.state_counts()],
        total_time=duration(data.compute_s),
        best=_best_rows(best) if best else None,
        edges=_edge_notes(data),
        snippet=snippet,
        figures=figs,
        fronts=fronts,
        columns=COLUMNS,
        rows=_table_rows(data),
        fig_w=FIG_W_PX,
        fig_h=FIG_H_PX,
    )
