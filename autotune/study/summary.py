"""How a run of a study ends, whether it had one worker in-process or N worker processes: the
summary it returns, the line it prints and its exit status (autotune.errors). Light: no optuna,
no torch."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from autotune.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNFINISHED, EXIT_USER_ERROR

# Set (to "1") in the environment of the workers `run --workers N` starts: their parent prints the
# run's one summary, so a worker prints only its own stop reason.
SUPERVISED_ENV = "AUTOTUNE_SUPERVISED"


@dataclass(frozen=True)
class RunSummary:
    study_name: str
    finished: int
    total: int
    ran: int
    interrupted: bool
    best_score: float | None
    workers: int = 1
    user_error: bool = False  # a worker process exited with a one-line user error
    stop_reason: str | None = None  # why the run ended early (autotune.study.guard: a spec error, a
    stop_code: int | None = None  # repeated crash, a prediction, no complete trial) and its exit


def summary_line(s: RunSummary, shown_url: str) -> str:
    """The line printed when a run ends; ``shown_url`` must already be redacted."""
    best = "-" if s.best_score is None else f"{s.best_score:.4f}"
    state = "interrupted" if s.interrupted else "stopped" if s.stop_reason else "done"
    with_workers = f" with {s.workers} workers" if s.workers > 1 else ""
    hint = shlex.join(["autotune", "best", s.study_name, "--storage", shown_url])
    return (
        f"study '{s.study_name}': {s.finished}/{s.total} trials finished{with_workers} ({state}), "
        f"best score {best}; see `{hint}`"
    )


def exit_code(s: RunSummary) -> int:
    if s.user_error:
        return EXIT_USER_ERROR
    if s.interrupted:
        return EXIT_INTERRUPTED
    if s.stop_code is not None:
        return s.stop_code
    return EXIT_OK if s.finished >= s.total else EXIT_UNFINISHED
