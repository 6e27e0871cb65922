"""Ctrl-C, in two stages, for everything that runs trials or fits: `run`, `resume`, `worker`
(one process or the parent of N) and `train`.

The first SIGINT/SIGTERM asks the work to stop at its next step (the trial or fit is stored as
``interrupted`` and, for a trial, re-queued); the second stops at once, as Python's own Ctrl-C
does: ``KeyboardInterrupt`` is raised where the process is, so ``finally`` blocks still run (the
trial recipe stores the trial as interrupted, `train` removes its half-written output, the parent
of N workers has killed them first). It was ``os._exit`` for runs and this for `train` until
both took this one behaviour. Light: no optuna, no torch.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any


class TwoStageStop:
    """First SIGINT/SIGTERM: ``on_first`` (stop at the next step). Second: ``on_second``, then
    ``KeyboardInterrupt``. ``event`` is set from the first signal on."""

    def __init__(self, on_first: Callable[[], None] = lambda: None, on_second: Callable[[], None] = lambda: None):
        self.event = threading.Event()
        self._on_first, self._on_second = on_first, on_second
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.event.is_set():
            self._on_second()
            raise KeyboardInterrupt
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
