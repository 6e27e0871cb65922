"""Slots: trials run elsewhere, several at once (``--backend ray``), each driven by a thread of
the driver process, so the driver stays the one that asks, tells and writes (``driver._run``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.trial import TrialFn


@dataclass(frozen=True)
class Slots:
    """Trials run elsewhere (``--backend ray``): one trial function per slot, each driven by a
    thread of this process, so this process stays the one that asks, tells and writes. ``probe``
    runs the calibration probe where the trials run (``costs.calibration.RemoteProbe``)."""

    trial_fns: list[TrialFn]
    probe: Any = None
    on_gate: Callable[[Any], None] | None = None
    gate: bool = True  # False: the slots run a stand-in for the worker (no probe to run there)


def drive_slots(first: Any, slots: Slots, drive: Callable[[Any], int]) -> int:
    """One ``drive`` (the driver's ``_drive``) per slot, in threads sharing the study, its sampler (Optuna's own n_jobs
    does the same; TPE's constant liar sees the running trials), the gate, the guard and the stop.
    The study lock still serialises reserve -> ask -> claim, so the total is exact. The main
    thread waits here, where Ctrl-C reaches it, and re-raises the first error a slot met."""
    import dataclasses
    import threading

    loops = [first] + [dataclasses.replace(first, trial_fn=fn, told=None, _lock=None) for fn in slots.trial_fns[1:]]
    counts = [0] * len(loops)
    errors: list[BaseException] = []

    def slot(k: int) -> None:
        try:
            counts[k] = drive(loops[k])
        except BaseException as err:  # handed to the main thread; the other slots stop
            errors.append(err)
            first.stop.event.set()

    threads = [
        threading.Thread(target=slot, args=(k,), name=f"autotune-slot-{k}", daemon=True) for k in range(len(loops))
    ]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if errors:
        raise errors[0]
    first.total = max(lp.total for lp in loops)
    return sum(counts)
