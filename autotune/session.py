"""What a run of a study shares, whether it has one worker in-process or N worker processes:
the two-stage Ctrl-C, the run summary, the exit codes. Light: no optuna, no torch."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

EXIT_OK = 0
EXIT_UNFINISHED = 1  # the study stopped short of its total without a user error or an interrupt
EXIT_USER_ERROR = 2
EXIT_STOPPED = 3  # stopped early by a repeated identical crash or by predictions (autotune.guard)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


class TwoStageStop:
    """First SIGINT/SIGTERM: ``on_first`` (stop at the next step). Second: ``on_second``, then
    exit at once. ``event`` is set from the first signal on."""

    def __init__(self, on_first: Callable[[], None] = lambda: None, on_second: Callable[[], None] = lambda: None):
        self.event = threading.Event()
        self._on_first, self._on_second = on_first, on_second
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.event.is_set():
            self._on_second()
            os._exit(128 + signum)
        self.event.set()
        self._on_first()

    @contextlib.contextmanager
    def installed(self) -> Iterator[TwoStageStop]:
        if threading.current_thread() is not threading.main_thread():
            yield self  # signals reach the main thread only; a thread's caller sets the event
            return
        for sig in (signal.SIGINT.value, signal.SIGTERM.value):
            self._old[sig] = signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, old in self._old.items():
                signal.signal(sig, old)


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
    stop_reason: str | None = None  # why the run ended early (autotune.guard: a spec error, a
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
