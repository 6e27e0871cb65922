"""Reasons to stop a run early, watched by the driver after every trial.

- a crash that is a property of the spec (``TrialResult.spec_error``): stop at once, exit 2;
- the same crash message ``REPEAT_LIMIT`` times in a row: stop with that message, exit 3,
  instead of spending the remaining trials on it (finished trials stay stored);
- a run that ends without one complete trial: exit 1 with the most common error.
No torch, no optuna.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.errors import EXIT_STOPPED, EXIT_UNFINISHED, EXIT_USER_ERROR
from autotune.storage import Store
from autotune.trial import TrialResult, TrialState

REPEAT_LIMIT = 3


def error_key(error: str | None) -> str:
    """A crash's identity: the first line of its message (the traceback below it varies)."""
    text = (error or "").strip()
    return text.splitlines()[0] if text else "unknown error"


@dataclass
class Stop:
    reason: str
    exit_code: int


class RunGuard:
    def __init__(self, repeat_limit: int = REPEAT_LIMIT) -> None:
        self.repeat_limit = repeat_limit
        self.stop: Stop | None = None
        self._last: str | None = None
        self._streak = 0

    def observe(self, result: TrialResult) -> None:
        if result.state == TrialState.INTERRUPTED:
            return  # a Ctrl-C or a skipped start says nothing about the trials themselves
        if result.state != TrialState.CRASHED:
            self._last, self._streak = None, 0
            return
        key = error_key(result.error)
        if result.spec_error:
            self.stop = Stop(key, EXIT_USER_ERROR)
            return
        self._streak = self._streak + 1 if key == self._last else 1
        self._last = key
        if self._streak >= self.repeat_limit:
            self.stop = Stop(f"stopped: the same crash {self._streak} times in a row: {key}", EXIT_STOPPED)

    def request(self, reason: str, exit_code: int) -> None:
        if self.stop is None:
            self.stop = Stop(reason, exit_code)


def final_stop(store: Store, name: str, guard: RunGuard, interrupted: bool) -> None:
    """No complete trial at all when the run ends: exit non-zero with the most common error."""
    from autotune.storage.plan import count_complete, most_common_error

    if interrupted or guard.stop is not None or count_complete(store, name):
        return
    common = most_common_error(store, name)
    why = f"{common[0]} ({common[1]} trial{'s' if common[1] > 1 else ''})" if common else "no trial ran"
    guard.request(f"no trial completed; most common error: {why}", EXIT_UNFINISHED)
