"""Peak memory of one trial, measured against a baseline taken at trial start.

CUDA: ``max_memory_allocated`` after ``reset_peak_memory_stats``. CPU: resident set size sampled
by a background thread, minus the RSS before the trial (PEFT method_comparison's approach:
memory measured against a baseline, not absolute).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import psutil
import torch

_SAMPLE_S = 0.005  # 5 ms: a step on the tiny model takes a few ms; a coarser period misses peaks


# glibc's malloc raises its mmap threshold each time a block above it is freed (up to 32 MiB on
# 64-bit; mallopt(3), M_MMAP_THRESHOLD), and from then on a trial's activations come from the heap,
# which fragments and keeps freed pages resident. A CPU trial's RSS peak then carries 1.4-1.9x of
# heap slack over its live tensors, and depends on what ran before it in the process: MiniLM rank
# 16 batch 16 measured 417-489 MB after other trials, 508-515 MB as a process's first trial
# (bench/cpu_allocator.py). ``AUTOTUNE_MMAP_THRESHOLD=65536`` fixes the threshold: blocks above it
# are mapped on allocation and unmapped on free, RSS follows the live tensors (158 MB, the same in
# every run; 613 MB instead of 1,714 at batch 64) and the estimate's probe predicts it within a few
# percent, but every step pays the page faults: 1.66x the train time on the 2-core dev VM, idle.
# So it is not the default (0: glibc's own behaviour); set it where memory, not speed, is short.
MMAP_THRESHOLD = 0
_M_MMAP_THRESHOLD = -3  # malloc.h
_allocator_set = False


def steady_allocator() -> None:
    """Fix glibc's mmap threshold once per process (CPU trials; see MMAP_THRESHOLD)."""
    global _allocator_set
    if _allocator_set:
        return
    _allocator_set = True
    raw = os.environ.get("AUTOTUNE_MMAP_THRESHOLD", "")
    value = int(raw) if raw.isdigit() else MMAP_THRESHOLD
    if value > 0:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to set
            ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, value)


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
        if device.type != "cuda":
            steady_allocator()

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
