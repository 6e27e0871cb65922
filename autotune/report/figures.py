"""The report's figures, drawn with matplotlib (Agg, no display) and saved as PNG bytes.

One path serves both outputs: the same PNG bytes are written by ``--png`` and embedded (base64)
in the HTML. Plotly was the alternative; its PNG export needs kaleido, whose 1.x releases drive a
Chrome they find or download at run time (kaleido's own metadata says so), which a report command
on a CI box or a GPU node cannot count on. Parameter importance is Optuna's own matplotlib plot;
the other figures show what Optuna does not know (our states, curves, time and memory).

Every figure is FIG_W_PX x FIG_H_PX pixels: fixed size, so that 1,000 trials cost no more bytes
per figure than ten (a PNG, not one SVG element per point).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.report.data import ReportData, cost_points, finite, pareto_front

DPI = 96
FIG_W_PX, FIG_H_PX = 960, 480

# One colour and marker per state, used by every figure (matplotlib's tab10 colours).
STATE_STYLE: dict[str, tuple[str, str]] = {
    "complete": ("tab:blue", "o"),
    "pruned": ("tab:orange", "x"),
    "oom": ("tab:red", "v"),
    "diverged": ("tab:purple", "D"),
    "timeout": ("tab:brown", "s"),
    "crashed": ("black", "X"),
    "interrupted": ("tab:gray", "|"),
    "running": ("tab:cyan", "."),
}
BEST_COLOUR = "crimson"
BATCH_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


@dataclass(frozen=True)
class Figure:
    name: str  # file stem for --png, and the HTML anchor
    title: str
    png: bytes | None  # None: not drawn, see note
    note: str | None = None


def _new_figure(ncols: int = 1) -> tuple[Any, Any]:
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(FIG_W_PX / DPI, FIG_H_PX / DPI), dpi=DPI, layout="constrained")
    return fig, fig.subplots(1, ncols)


def _legend_outside(ax: Any, **kw: Any) -> None:
    """Right of the axes, so that it never hides a point; constrained layout makes room."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0.0, **kw)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # no bbox_inches="tight": that would change the size
    return buf.getvalue()


def _score_of(t: dict[str, Any], data: ReportData) -> float | None:
    """A complete trial's score; for a pruned one its last evaluated score (where it was cut).
    Failed trials have none: a diverged trial's last finite score would flatter it."""
    if t["state"] not in ("complete", "pruned"):
        return None
    s = finite(t["score"])
    if s is None and data.curves.get(t["trial_number"]):
        s = data.curves[t["trial_number"]][-1].score
    return s


def history(data: ReportData) -> Figure:
    from matplotlib.ticker import MaxNLocator

    fig, ax = _new_figure()
    best_x: list[int] = []
    best_y: list[float] = []
    running = float("inf")
    unscored: dict[str, list[int]] = {}
    scored: dict[str, tuple[list[int], list[float]]] = {}
    for t in data.trials:
        n, state, s = t["trial_number"], t["state"], _score_of(t, data)
        if s is None:
            unscored.setdefault(state, []).append(n)
            continue
        xs, ys = scored.setdefault(state, ([], []))
        xs.append(n)
        ys.append(s)
        if state == "complete" and s < running:
            running = s
        if running < float("inf"):
            best_x.append(n)
            best_y.append(running)
    for state, (xs, ys) in scored.items():
        colour, marker = STATE_STYLE.get(state, ("gray", "."))
        ax.scatter(xs, ys, s=18, c=colour, marker=marker, label=f"{state} ({len(xs)})", zorder=3)
    if best_x:
        ax.step(best_x, best_y, where="post", color=BEST_COLOUR, lw=1.6, label="running best", zorder=4)
    # Trials without a score (out of memory, crashed, ...) sit on a strip along the bottom edge.
    strip = ax.get_xaxis_transform()
    for state, xs in unscored.items():
        colour, marker = STATE_STYLE.get(state, ("gray", "."))
        ax.scatter(xs, [0.03] * len(xs), transform=strip, c=colour, marker=marker, s=30, label=f"{state} ({len(xs)})")
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("score (lower is better)")
    ax.set_title("Optimization history", loc="left")
    _legend_outside(ax)
    return Figure("history", "Optimization history", _png(fig))


def curves(data: ReportData) -> Figure:
    from matplotlib.collections import LineCollection

    if not data.curves:
        return Figure("curves", "Learning curves", None, "no trial reached an evaluation: no learning curve to draw")
    fig, ax = _new_figure()
    states = {t["trial_number"]: t["state"] for t in data.trials}
    best_n = data.best["trial_number"] if data.best else None
    alpha = max(0.1, min(0.8, 20 / max(1, len(data.curves))))  # many trials: fainter lines
    groups: dict[str, list[list[tuple[int, float]]]] = {}
    cut_x: list[int] = []
    cut_y: list[float] = []
    for n, pts in data.curves.items():
        line = [(p.examples_seen, p.score) for p in pts]
        state = states.get(n, "running")
        groups.setdefault(state, []).append(line)
        if state == "pruned":
            cut_x.append(line[-1][0])
            cut_y.append(line[-1][1])
    for state, lines in groups.items():
        colour = STATE_STYLE.get(state, ("gray", "."))[0]
        ax.add_collection(LineCollection(lines, colors=colour, alpha=alpha, lw=1.0, label=f"{state} ({len(lines)})"))
    if cut_x:
        ax.scatter(cut_x, cut_y, marker="x", c=STATE_STYLE["pruned"][0], s=28, label="pruned here", zorder=3)
    if best_n is not None and best_n in data.curves:
        pts = data.curves[best_n]
        ax.plot(
            [p.examples_seen for p in pts],
            [p.score for p in pts],
            color=BEST_COLOUR,
            lw=2.5,
            marker="o",
            label=f"best (trial {best_n})",
            zorder=5,
        )
    ax.autoscale_view()
    ax.set_xlabel("training examples seen")
    ax.set_ylabel("score")
    ax.set_title("Learning curves", loc="left")
    _legend_outside(ax)
    return Figure("curves", "Learning curves", _png(fig))


def importance(data: ReportData) -> Figure:
    title = "Parameter importance"
    if data.optuna_study is None:
        return Figure("importance", title, None, data.optuna_note)
    if len(data.complete) < 2:
        return Figure("importance", title, None, "parameter importance needs at least 2 complete trials")
    import matplotlib
    import matplotlib.pyplot as plt
    import optuna
    import optuna.visualization.matplotlib as ovm

    # Optuna logs one line per infeasible (inf) trial it leaves out: noise for 1,000 trials.
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    # Optuna's plot calls plt.style.use("ggplot"); rc_context puts the global style back after.
    with matplotlib.rc_context(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ax = ovm.plot_param_importances(data.optuna_study)
        except (ValueError, RuntimeError, ZeroDivisionError) as err:
            return Figure("importance", title, None, f"Optuna could not rate the parameters: {err}")
        fig = ax.get_figure(root=True)
        assert fig is not None
        fig.set_size_inches(FIG_W_PX / DPI, FIG_H_PX / DPI)
        fig.set_layout_engine("constrained")
        png = _png(fig)
        plt.close(fig)
    return Figure("importance", title, png)


def lr_slice(data: ReportData) -> Figure:
    title = "Score against learning rate"
    rows = [t for t in data.complete if finite(t["learning_rate"]) is not None]
    if not rows:
        return Figure("slice", title, None, "no complete trial with a learning rate")
    import matplotlib as mpl
    from matplotlib.lines import Line2D

    fig, ax = _new_figure()
    ranks = sorted({t["rank"] for t in rows}, key=lambda v: (v is None, v))
    batches = sorted({t["batch_size"] for t in rows}, key=lambda v: (v is None, v))
    cmap = mpl.colormaps["viridis"]
    colour = {r: cmap(i / max(1, len(ranks) - 1)) for i, r in enumerate(ranks)}
    marker = {b: BATCH_MARKERS[i % len(BATCH_MARKERS)] for i, b in enumerate(batches)}
    for b in batches:
        sel = [t for t in rows if t["batch_size"] == b]
        ax.scatter(
            [t["learning_rate"] for t in sel],
            [t["score"] for t in sel],
            c=[colour[t["rank"]] for t in sel],
            marker=marker[b],
            s=36,
            edgecolors="black",
            linewidths=0.4,
        )
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("score")
    ax.set_title(title + " (colour: LoRA rank, marker: batch size)", loc="left")
    handles = [Line2D([], [], ls="", marker="o", color=colour[r], label=f"rank {r}") for r in ranks]
    handles += [Line2D([], [], ls="", marker=marker[b], color="black", label=f"batch {b}") for b in batches]
    _legend_outside(ax, handles=handles)
    return Figure("slice", title, _png(fig))


def cost(data: ReportData) -> Figure:
    title = "Cost: score against wall time and peak memory"
    rows = data.complete
    if not rows:
        return Figure("cost", title, None, "no complete trial: no cost to compare")
    fig, axes = _new_figure(ncols=2)
    kind = next((t["memory_kind"] for t in rows if t.get("memory_kind")), None)
    mem_label = "peak memory (MB" + (f", {kind})" if kind else ")")
    for ax, key, label in ((axes[0], "wall_time_s", "wall time (s)"), (axes[1], "peak_memory_mb", mem_label)):
        pts = cost_points(rows, key)
        front = pareto_front(pts)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=16, c=STATE_STYLE["complete"][0], label="complete")
        if front:
            ax.step([p[0] for p in front], [p[1] for p in front], where="post", color=BEST_COLOUR, lw=1.2)
            ax.scatter(
                [p[0] for p in front], [p[1] for p in front], s=60, facecolors="none", edgecolors=BEST_COLOUR, lw=1.6
            )
            ax.scatter([], [], s=60, facecolors="none", edgecolors=BEST_COLOUR, label=f"Pareto front ({len(front)})")
        else:
            ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center")
        ax.set_xlabel(label)
        ax.set_ylabel("score")
        ax.legend(loc="best", fontsize="small")
    fig.suptitle(title, x=0.01, ha="left")
    return Figure("cost", title, _png(fig))


FIGURES: tuple[Callable[[ReportData], Figure], ...] = (history, curves, importance, lr_slice, cost)


def draw_all(data: ReportData) -> list[Figure]:
    import matplotlib

    matplotlib.use("Agg")  # never open a window: the report opens nothing by itself
    return [draw(data) for draw in FIGURES]
