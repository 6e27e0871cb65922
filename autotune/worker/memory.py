"""Peak memory of one trial, measured against a baseline taken at trial start.

CUDA: ``max_memory_allocated`` after ``reset_peak_memory_stats``. CPU: resident set size sampled
by a background thread, minus the RSS before the trial (PEFT method_comparison's approach:
memory measured against a baseline, not absolute).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading

import psutil
import torch

_SAMPLE_S = 0.005  # 5 ms: a step on the tiny model takes a few ms; a coarser period misses peaks


def _malloc_trim() -> None:
    # Not glibc: no trim, and the baseline is then only an upper bound.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class MemoryMeter:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.kind = "cuda_max_allocated" if device.type == "cuda" else "cpu_rss_above_baseline"
        self._proc = psutil.Process()
        self._baseline = 0
        self._peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryMeter:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._baseline = torch.cuda.memory_allocated(self.device)
        else:
            # Give freed heap back to the OS first: otherwise memory a previous trial freed is
            # still resident, and this trial's growth would hide inside it.
            _malloc_trim()
            self._baseline = self._peak = self._proc.memory_info().rss
            self._thread = threading.Thread(target=self._sample, name="autotune-rss", daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(_SAMPLE_S):
            rss = self._proc.memory_info().rss
            if rss > self._peak:
                self._peak = rss

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._peak = max(self._peak, self._proc.memory_info().rss)

    def peak_mb(self) -> float:
        if self.device.type == "cuda":
            # Absolute peak of tensors allocated: the base model counts, as it must fit the GPU.
            return float(torch.cuda.max_memory_allocated(self.device)) / 2**20
        return max(0, self._peak - self._baseline) / 2**20
