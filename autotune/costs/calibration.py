"""A study's calibration and the memory limit its configs must fit: the probe this study already
ran on this kind of device (stored with the study), else a new one; and the limit, from the spec
or the device. Used by the gate during a run (study/gate.py) and by `autotune estimate`.
Torch loads only inside the functions, when the probe runs."""

from __future__ import annotations

from typing import Any, Protocol

from autotune.spec import StudySpec
from autotune.storage import Store

CUDA_MARGIN = 0.9  # CUDA: use at most 90% of total memory (the CUDA context, cuBLAS workspaces
# and the caching allocator's fragmentation sit outside max_memory_allocated)
# CPU: a trial's peak_memory_mb counts the bytes malloc handed out (worker/memory.py); the process's
# RSS grows 2.5-3.2x that, glibc's heap slack (MiniLM trials, 2026-12-03; worker/memory.py), so the
# default CPU limit is the available RAM over the top of that range.
CPU_SLACK = 3.2
# A CPU study with nothing asked skips the probe when its largest config peaks under this share of
# the limit (fits_without_predictions): that one mini-trial is a single point, with no correction
# from measured trials, and seeds whose widest batch is wider than the probed one; a study that
# comes within 2x of the RAM is one where the full probe is worth its seconds.
FIT_SHARE = 0.5


def memory_limit_mb(spec: StudySpec, cal: Any) -> tuple[float | None, str]:
    """The limit configs must fit: the spec's budget.memory_limit_mb, else the device's."""
    if spec.budget.memory_limit_mb is not None:
        return spec.budget.memory_limit_mb, "budget.memory_limit_mb"
    return _device_limit_mb(cal.device, cal.memory_kind, cal.device_memory_mb)


def _device_limit_mb(device: str, kind: str, total_mb: float | None) -> tuple[float | None, str]:
    if total_mb is None:
        return None, "none"
    if device == "cuda":
        return total_mb * CUDA_MARGIN, "90% of the GPU's memory"
    from autotune.worker.memory import CPU_ALLOCATED  # torch: the probe has loaded it already

    if kind == CPU_ALLOCATED:
        return total_mb / CPU_SLACK, f"available RAM / {CPU_SLACK} (glibc's heap slack)"
    return total_mb, "available RAM"


def fits_without_predictions(spec: StudySpec, cache_dir: str | None) -> bool:
    """True when a CPU study that asked for no check (no memory limit, no time budget, no
    ``gradient_checkpointing: auto``) can run without the calibration probe.

    There the probe buys the gate one decision: skip a config predicted above the available RAM.
    It was most of the quickstart's time outside training: 12.8-13.6 s with it, 4.5-4.9 s with this
    check instead (bench/results/probe_skip.json). Peak memory grows with rank and batch size, so
    one mini-trial of the largest of each adapter variant settles it: under ``FIT_SHARE`` of the
    limit, no config can be predicted over it. On a GPU the probe stays: that is where configs run out of memory, and
    packing (``--backend ray``) reads its predictions."""
    from autotune.costs.probe import device_memory_mb, largest_peaks_mb
    from autotune.worker.memory import memory_kind
    from autotune.worker.precision import pick_device

    device = pick_device().type
    if device != "cpu":
        return False
    limit, _ = _device_limit_mb(device, memory_kind(device), device_memory_mb(device))
    return limit is not None and max(largest_peaks_mb(spec, cache_dir)) <= FIT_SHARE * limit


class RemoteProbe(Protocol):
    """The probe where the trials run, when that is not this process (``--backend ray``: a GPU
    actor, while the driver may have no GPU at all)."""

    def device_key(self, spec: StudySpec) -> str: ...

    def calibrate(self, spec: StudySpec, cache_dir: str | None) -> dict[str, Any]: ...  # Calibration.to_json()

    def device_memory_mb(self, device_type: str) -> float | None: ...

    def memory_kind(self, device_type: str) -> str: ...


def study_calibration(
    spec: StudySpec, store: Store, name: str, cache_dir: str | None, remote: RemoteProbe | None = None
) -> Any:
    """The probe this study already ran on this kind of device (stored with the study), else a new
    one, stored for ``resume`` and the other workers: the probe costs a study's first worker about
    20 s on the quickstart, and its figures do not change while the spec does not. On SQLite every
    worker is on this machine; they probe one at a time, so the first one's probe serves the rest."""
    import contextlib
    import dataclasses

    from autotune.costs.model import Calibration
    from autotune.storage.engine import sqlite_file_lock
    from autotune.storage.plan import load_calibration, save_calibration

    if remote is None:
        from autotune.costs.probe import calibrate, device_key, device_memory_mb
        from autotune.worker.memory import memory_kind

        def fresh() -> Any:
            return calibrate(spec, cache_dir)
    else:
        device_key, device_memory_mb, memory_kind = remote.device_key, remote.device_memory_mb, remote.memory_kind

        def fresh() -> Any:
            return Calibration.from_json(remote.calibrate(spec, cache_dir))

    key = device_key(spec)
    local = store.url.get_backend_name() == "sqlite"
    with sqlite_file_lock(store.url, "autotune-probe-lock") if local else contextlib.nullcontext():
        stored = load_calibration(store, name, key)
        cal = Calibration.from_json(stored) if stored is not None else None
        # a probe stored while this device measured memory another way (CPU RSS, before the
        # allocated-bytes meter) predicts another quantity: probe again
        if cal is not None and cal.memory_kind == memory_kind(cal.device):
            # what is free now, not when the probe ran
            return dataclasses.replace(cal, device_memory_mb=device_memory_mb(cal.device), probe_s=0.0)
        cal = fresh()
        save_calibration(store, name, key, cal.to_json())
        return cal
