"""One two-stage Ctrl-C for `run`, `resume`, `worker` and `train` (autotune/interrupt.py)."""

from __future__ import annotations

import os
import signal

import pytest

from autotune.interrupt import TwoStageStop


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_first_signal_asks_to_stop_and_the_second_stops_at_once(sig: signal.Signals) -> None:
    calls: list[str] = []
    stop = TwoStageStop(on_first=lambda: calls.append("first"), on_second=lambda: calls.append("second"))
    before = signal.getsignal(sig)
    with stop.installed():
        os.kill(os.getpid(), sig)  # handlers run in the main thread before the next bytecode
        assert stop.event.is_set()
        assert calls == ["first"]  # work goes on until its next step
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)
            signal.sigtimedwait([], 0.1)  # give the handler a point to run at
        assert calls == ["first", "second"]  # the parent of N workers kills them before it raises
    assert signal.getsignal(sig) is before  # the old handler is back


def test_outside_the_main_thread_nothing_is_installed() -> None:
    import threading

    seen: list[object] = []

    def run() -> None:
        with TwoStageStop().installed() as stop:
            seen.append(signal.getsignal(signal.SIGINT))
            seen.append(stop.event.is_set())

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [signal.getsignal(signal.SIGINT), False]
