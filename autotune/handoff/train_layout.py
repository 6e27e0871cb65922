"""What `autotune train` leaves behind: the provenance file in each saved fit, the output
directory's layout (the best fit at the top, the others under candidates/), and the table that
says whether the short-budget ranking held. Torch-free."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from autotune.spec import StudySpec
from autotune.text_table import render_table
from autotune.trial import TrialConfig, TrialResult, TrialState, config_to_json
from autotune.version import __version__

PROVENANCE = "autotune_train.json"  # the same name as autotune.worker.fit.PROVENANCE


@dataclasses.dataclass
class Fit:
    trial: dict[str, Any]
    config: TrialConfig
    fit_id: int
    result: TrialResult | None = None
    path: Path | None = None  # inside the temporary directory


def provenance(
    f: Fit, study: str, spec: StudySpec, budget: int, n_train: int, labels: list[str] | None
) -> dict[str, Any]:
    r = f.result
    assert r is not None
    t = f.trial
    return {
        "study": study,
        "trial": t["trial_number"],
        "params": t["params"],
        "base_model": spec.model.name,
        "task": spec.task,
        "labels": labels,
        "target_modules": r.target_modules,
        "budget": {
            "train_examples": budget,
            "epochs": budget / n_train,
            "train_split_examples": n_train,
            "trial_train_examples": spec.budget.train_examples,
        },
        "metrics": {
            "val_loss": r.val_loss,
            "train_loss": r.train_loss,
            "score": r.score,
            "accuracy": r.accuracy,
            "trial_score": t["score"],
            "trial_val_loss": t["val_loss"],
            "trial_accuracy": t["accuracy"],
        },
        "time": {"wall_s": r.wall_time_s, "train_s": r.train_time_s, "eval_s": r.eval_time_s},
        "peak_memory_mb": r.peak_memory_mb,
        "memory_kind": r.memory_kind,
        "device": r.device,
        "precision": r.precision,
        "versions": {**r.versions, "autotune": __version__},
        "config": config_to_json(f.config),
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
    }


def layout(
    tmp: Path,
    out: Path,
    fits: list[Fit],
    best: Fit,
    study: str,
    spec: StudySpec,
    budget: int,
    n_train: int,
    labels: list[str] | None,
) -> None:
    """Provenance in every saved fit; the best one's files moved up to the top of the output."""
    for f in fits:
        if f.result is not None and f.result.state == TrialState.COMPLETE and f.path is not None:
            prov = provenance(f, study, spec, budget, n_train, labels)
            (f.path / PROVENANCE).write_text(json.dumps(prov, indent=2) + "\n")
    assert best.path is not None
    for item in best.path.iterdir():
        os.replace(item, tmp / item.name)
    best.path.rmdir()
    cands = tmp / "candidates"
    if cands.is_dir() and not any(cands.iterdir()):
        cands.rmdir()


def summary(fits: list[Fit], best: Fit, out: Path) -> str:
    """The table of fits, and whether the short-budget ranking held (Spearman's rho)."""
    cols = ("trial", "state", "short_score", "long_score", "val_loss", "accuracy", "time_s", "peak_mb")
    rows = []
    for f in fits:
        r = f.result
        rows.append(
            {
                "trial": f.trial["trial_number"],
                "state": r.state.value if r else "interrupted",
                "short_score": f.trial["score"],
                "long_score": r.score if r else None,
                "val_loss": r.val_loss if r else None,
                "accuracy": r.accuracy if r else None,
                "time_s": r.wall_time_s if r else None,
                "peak_mb": r.peak_memory_mb if r else None,
            }
        )
    lines = [render_table(rows, cols), ""]
    lines.append(ranking_line(rows))
    lines.append(
        f"saved trial {best.trial['trial_number']} to {out}"
        + (f" (others under {out / 'candidates'})" if len(fits) > 1 else "")
    )
    return "\n".join(lines)


def ranking_line(rows: list[dict[str, Any]]) -> str:
    pairs = [
        (r["short_score"], r["long_score"])
        for r in rows
        if r["short_score"] is not None and r["long_score"] is not None
    ]
    if len(pairs) < 2:
        return "ranking: one fit, nothing to compare (use --top K to check the short-budget ranking)"
    from scipy.stats import spearmanr

    short, long_ = zip(*pairs, strict=True)
    rho = float(spearmanr(short, long_).statistic)
    by_short = sorted(range(len(pairs)), key=lambda i: short[i])
    by_long = sorted(range(len(pairs)), key=lambda i: long_[i])
    winner = "stays" if by_short[0] == by_long[0] else "does not stay"
    held = "held" if by_short == by_long else "did not hold"
    return (
        f"ranking {held}: Spearman's rho {rho:.2f} over {len(pairs)} fits; the short-budget winner "
        f"{winner} best at the longer budget"
    )
