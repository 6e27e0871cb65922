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


def memory_limit_mb(spec: StudySpec, cal: Any) -> tuple[float | None, str]:
    """The limit configs must fit: the spec's budget.memory_limit_mb, else the device's."""
    if spec.budget.memory_limit_mb is not None:
        return spec.budget.memory_limit_mb, "budget.memory_limit_mb"
    if cal.device_memory_mb is None:
        return None, "none"
    if cal.device == "cuda":
        return cal.device_memory_mb * CUDA_MARGIN, "90% of the GPU's memory"
    from autotune.worker.memory import CPU_ALLOCATED  # torch: the probe has loaded it already

    if cal.memory_kind == CPU_ALLOCATED:
        return cal.device_memory_mb / CPU_SLACK, f"available RAM / {CPU_SLACK} (glibc's heap slack)"
    return cal.device_memory_mb, "available RAM"


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
