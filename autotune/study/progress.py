"""Progress of a study run: trials done / total, best score so far, the running trial's step.

On a terminal it is a tqdm bar; elsewhere (CI logs, pipes) one plain line per finished trial.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tqdm.auto import tqdm  # a widget in a notebook, the text bar on a terminal

from autotune.trial import TrialState


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def make_bar(total: int, done: int) -> tqdm[Any] | None:
    """A tqdm bar on a terminal or in a Jupyter kernel; None elsewhere (CI logs, pipes get one
    line per trial)."""
    if not sys.stderr.isatty() and "ipykernel" not in sys.modules:
        return None
    return tqdm(total=total, initial=min(done, total), desc="trials", unit="trial", file=sys.stderr, dynamic_ncols=True)


def finished_line(number: int, state: str, score: float | None, best: float | None) -> str:
    """The plain line for a finished trial, the same from one worker or many."""
    return f"trial {number} {state} score={_fmt(score)} best={_fmt(best)}"


class Progress:
    def __init__(
        self, total: int, done: int, *, enabled: bool, n_evals: int, best: Callable[[], dict[str, Any] | None]
    ) -> None:
        self._best_row = best  # read only when something is shown: a query per trial otherwise
        self.total = total
        self.n_evals = n_evals
        self.enabled = enabled
        self.best: float | None = None
        self.current = ""
        self.bar = make_bar(total, done) if enabled else None

    def set_total(self, total: int) -> None:
        """The confirmation phase adds its runs to the total once they are queued."""
        self.total = total
        if self.bar is not None and self.bar.total != total:
            self.bar.total = total
            self.bar.refresh()

    def _postfix(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"best={_fmt(self.best)} {self.current}", refresh=True)

    def trial_started(self, number: int, params: dict[str, Any]) -> None:
        self.current = f"trial {number}: eval 0/{self.n_evals}"
        self._postfix()

    def evaluated(self, step: int, score: float) -> None:
        self.current = f"{self.current.split(':')[0]}: eval {step}/{self.n_evals} score={score:.4f}"
        self._postfix()

    def trial_finished(self, number: int, state: TrialState, score: float | None) -> None:
        if not self.enabled:
            return
        best_row = self._best_row()
        self.best = best_row["score"] if best_row else None
        counted = state not in (TrialState.INTERRUPTED,)
        if self.bar is not None:
            if counted:
                self.bar.update(1)
            self.current = f"trial {number} {state.value}"
            self._postfix()
        else:
            print(finished_line(number, state.value, score, self.best), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
