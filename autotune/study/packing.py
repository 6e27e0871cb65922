"""Packing trials onto a GPU by predicted memory (``--backend ray --pack``): which trials hold how
much of each GPU, in the driver. A trial starts on its GPU only while the predictions of the trials
there, plus its own, fit; alone on a GPU it always starts (the gate already skipped what cannot fit
at all). See study/ray_backend.py for why this is a ledger here and not a Ray resource request."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class _Holder:
    need_mb: float
    cotenants: int = 0


@dataclass
class Ledger:
    """Which trials hold how much of each GPU's memory, by prediction (see the module docstring)."""

    capacity_mb: float
    held: dict[str, dict[int, _Holder]] = field(default_factory=dict)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def fits(self, gpu: str, need_mb: float) -> bool:
        on = self.held.get(gpu, {})
        return not on or sum(h.need_mb for h in on.values()) + need_mb <= self.capacity_mb

    @contextlib.contextmanager
    def hold(self, gpu: str, need_mb: float, stop: threading.Event) -> Iterator[_Holder | None]:
        """Wait until the trial fits on ``gpu`` (None if ``stop`` is set first), then hold its share."""
        with self.cond:
            while not self.fits(gpu, need_mb):
                if stop.is_set():
                    yield None
                    return
                self.cond.wait(0.2)
            on = self.held.setdefault(gpu, {})
            holder = _Holder(need_mb)
            me = id(holder)
            on[me] = holder
            for h in on.values():  # everyone on this GPU now has len(on) - 1 others
                h.cotenants = max(h.cotenants, len(on) - 1)
        try:
            yield holder
        finally:
            with self.cond:
                del self.held[gpu][me]
                self.cond.notify_all()
