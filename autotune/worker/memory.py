"""Peak memory of one trial, measured against a baseline taken at trial start.

CUDA: ``max_memory_allocated`` after ``reset_peak_memory_stats``: the bytes of live tensors, not
what the caching allocator holds. CPU, the same quantity: the bytes glibc's malloc has handed out
and not taken back (``mallinfo2``: heap chunks in use plus mmapped blocks), sampled by a
background thread, minus the same figure before the trial (PEFT method_comparison's approach:
memory measured against a baseline, not absolute). Where ``mallinfo2`` is missing (not glibc, or
glibc before 2.33) the CPU figure falls back to resident set size above the baseline.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time
from collections.abc import Callable, Iterator

import psutil
import torch

_SAMPLE_S = 0.005  # 5 ms: a step on the tiny model takes a few ms; a coarser period misses peaks
# A sample of mallinfo2 costs ~0.2 ms on MiniLM's heap (it walks the free lists) and ~0.02 ms on a
# tiny model's: the period is 40x the last sample's cost, within 1..5 ms, so the sampler takes at
# most ~2.5% of a core and samples fastest where steps are shortest.
_MIN_SAMPLE_S, _COST_FACTOR = 0.001, 40.0


# glibc's malloc raises its mmap threshold each time a block above it is freed (up to 32 MiB on
# 64-bit; mallopt(3), M_MMAP_THRESHOLD), and from then on a trial's activations come from the heap,
# which fragments and keeps freed pages resident. A CPU trial's RSS then carries 2.5-3.2x its
# allocated peak (below), and depends on what ran before it in the process.
# ``AUTOTUNE_MMAP_THRESHOLD=65536`` fixes the threshold: blocks above it are mapped on allocation
# and unmapped on free, RSS follows the allocated bytes (613 MB instead of 1,714 at MiniLM batch
# 64), but every step pays the page faults: 1.66x the train time on the 2-core dev VM, idle
# (bench/cpu_allocator.py). So it is not the default (0: glibc's own behaviour); set it where RAM,
# not speed, is short.
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


class _MallInfo2(ctypes.Structure):
    # struct mallinfo2, malloc.h (glibc >= 2.33): ten size_t fields
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")
    ]  # fmt: skip


def _mallinfo2() -> Callable[[], int] | None:
    """Bytes malloc has handed out (heap chunks in use + mmapped blocks); None without mallinfo2."""
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2

    def in_use() -> int:
        m = fn()
        return int(m.uordblks) + int(m.hblkhd)

    return in_use


# Why allocated bytes and not RSS on CPU: a config's memory must belong to the config to be
# predicted or compared, and RSS does not. In one process the same MiniLM trial (rank 16, batch 16)
# peaked at 404-503 MB of RSS and 156-157 MB allocated every time; rank 4, batch 64 at 1,532-1,728
# MB RSS and 611-623 MB allocated (2026-12-03, both figures sampled side by side by this meter).
# RSS above the baseline ran 2.5-3.2x the allocated peak: costs/calibration.CPU_SLACK keeps that headroom
# when the limit is the available RAM. Each sample costs ~0.2 ms (mallinfo2 walks the free lists).
_IN_USE = _mallinfo2()
CPU_ALLOCATED = "cpu_allocated_above_baseline"  # memory_kind on glibc: the allocated-bytes meter


def _malloc_trim() -> None:
    # Not glibc: no trim, and the baseline is then only an upper bound.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


_active: MemoryMeter | None = None  # the CPU meter of the trial or probe running in this process


def sample_now() -> None:
    """Take a CPU sample at once: the training loop calls this where its peaks are (after the
    forward, with every activation alive; after the backward; after an evaluation batch's
    forward). A tiny model's step lasts a few ms, shorter than the sampler's period, so the
    thread alone catches its peaks by chance. No meter running (or CUDA): nothing to do."""
    meter = _active
    if meter is not None:
        now = meter._now()
        if now > meter._peak:
            meter._peak = now


@contextlib.contextmanager
def leaf_samples(model: torch.nn.Module) -> Iterator[None]:
    """Sample after every leaf module's forward while inside (an evaluation pass on CPU): without
    autograd an evaluation frees each intermediate as soon as the next module has read it, so its
    peak is a moment inside one block (GPT-2's MLP: input, fc output and activation at once) that
    no sample after the whole forward sees. A trial evaluates the same batches each time, so only
    its first pass is hooked (MiniLM: +8% on that pass's time, +0.5% on the trial's). No CPU meter
    running: nothing is hooked."""
    meter = _active
    if meter is None or meter.leaves_sampled:
        yield
        return
    leaves = [m for m in model.modules() if not any(True for _ in m.children())]
    handles = [m.register_forward_hook(lambda *_: sample_now()) for m in leaves]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        meter.leaves_sampled = True


class MemoryMeter:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._in_use = _IN_USE if device.type != "cuda" else None
        self.kind = memory_kind(device.type)
        self._proc = psutil.Process()
        self._baseline = 0
        self._peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.leaves_sampled = False  # leaf_samples has hooked one evaluation pass
        if device.type != "cuda":
            steady_allocator()

    def _now(self) -> int:
        return self._in_use() if self._in_use is not None else int(self._proc.memory_info().rss)

    def __enter__(self) -> MemoryMeter:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._baseline = torch.cuda.memory_allocated(self.device)
        else:
            if self._in_use is None:
                # RSS: give freed heap back to the OS first, or memory a previous trial freed is
                # still resident and this trial's growth hides inside it.
                _malloc_trim()
            self._baseline = self._peak = self._now()
            self._thread = threading.Thread(target=self._sample, name="autotune-memory", daemon=True)
            self._thread.start()
            global _active
            _active = self
        return self

    def _sample(self) -> None:
        period = _SAMPLE_S
        while not self._stop.wait(period):
            t0 = time.perf_counter()
            now = self._now()
            if now > self._peak:
                self._peak = now
            period = min(_SAMPLE_S, max(_MIN_SAMPLE_S, _COST_FACTOR * (time.perf_counter() - t0)))

    def __exit__(self, *exc: object) -> None:
        global _active
        if _active is self:
            _active = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._peak = max(self._peak, self._now())

    def restart_peak(self) -> float:
        """The peak so far (as ``peak_mb``), then a new peak from now on, over the same baseline:
        the probe reads training's and the evaluation's peaks apart."""
        so_far = self.peak_mb()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._peak = self._now()
        return so_far

    def peak_mb(self) -> float:
        if self.device.type == "cuda":
            # Absolute peak of tensors allocated: the base model counts, as it must fit the GPU.
            return float(torch.cuda.max_memory_allocated(self.device)) / 2**20
        return max(0, self._peak - self._baseline) / 2**20


def memory_kind(device_type: str) -> str:
    """What ``peak_memory_mb`` measures on this kind of device (stored as ``memory_kind``)."""
    if device_type == "cuda":
        return "cuda_max_allocated"
    return CPU_ALLOCATED if _IN_USE is not None else "cpu_rss_above_baseline"
