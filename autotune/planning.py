"""The driver's hooks for planning before spending; the driver calls these and nothing more.

- ``before_study``: the model checked with transformers (no weights) and the data fingerprint
  stored or compared; every problem is one SpecError line before any trial.
- ``Gate``: predictions from the calibration probe. A config predicted above the memory limit is
  not run (stored ``oom``, "predicted N MB > limit M MB", marked ``not_run`` so it does not count
  toward n_trials); a trial whose predicted time would overrun the study's time budget is not
  started and the run ends; every trial run gets its prediction stored beside its measurement.
- ``final_stop``: a run that ends without one complete trial says why.
"""

from __future__ import annotations

import time
from typing import Any

from autotune.guard import EXIT_NO_COMPLETE, EXIT_STOPPED, RunGuard
from autotune.spec import StudySpec
from autotune.storage import Store
from autotune.trial import TrialResult, TrialState

CUDA_MARGIN = 0.9  # CUDA: use at most 90% of total memory (the CUDA context, cuBLAS workspaces
# and the caching allocator's fragmentation sit outside max_memory_allocated)
# CPU: a trial's peak_memory_mb counts the bytes malloc handed out (worker/memory.py); the process's
# RSS grows 2.5-3.2x that, glibc's heap slack (MiniLM trials, 2026-12-03; worker/memory.py), so the
# default CPU limit is the available RAM over the top of that range.
CPU_SLACK = 3.2
CPU_ALLOCATED = "cpu_allocated_above_baseline"  # worker/memory.memory_kind on glibc (the worker cannot import this)
SKIP_LIMIT = 20  # consecutive configs not run by prediction before the run gives up


def before_study(store: Store, spec: StudySpec, name: str, labels: list[str] | None) -> None:
    from autotune.fingerprint import check_fingerprint, data_fingerprint
    from autotune.preflight import preflight
    from autotune.storage.plan import load_fingerprint, save_fingerprint

    preflight(spec, labels)
    current = data_fingerprint(spec)
    stored = load_fingerprint(store, name)
    if stored is None:
        if current:
            save_fingerprint(store, name, current)
    else:
        check_fingerprint(stored, current, name)


def memory_limit_mb(spec: StudySpec, cal: Any) -> tuple[float | None, str]:
    """The limit configs must fit: the spec's budget.memory_limit_mb, else the device's."""
    if spec.budget.memory_limit_mb is not None:
        return spec.budget.memory_limit_mb, "budget.memory_limit_mb"
    if cal.device_memory_mb is None:
        return None, "none"
    if cal.device == "cuda":
        return cal.device_memory_mb * CUDA_MARGIN, "90% of the GPU's memory"
    if cal.memory_kind == CPU_ALLOCATED:
        return cal.device_memory_mb / CPU_SLACK, f"available RAM / {CPU_SLACK} (glibc's heap slack)"
    return cal.device_memory_mb, "available RAM"


def study_calibration(spec: StudySpec, store: Store, name: str, cache_dir: str | None) -> Any:
    """The probe this study already ran on this kind of device (stored with the study), else a new
    one, stored for ``resume`` and the other workers: the probe costs a study's first worker about
    20 s on the quickstart, and its figures do not change while the spec does not. On SQLite every
    worker is on this machine; they probe one at a time, so the first one's probe serves the rest."""
    import contextlib
    import dataclasses

    from autotune.estimate.model import Calibration
    from autotune.estimate.probe import calibrate, device_key, device_memory_mb
    from autotune.storage.engine import sqlite_file_lock
    from autotune.storage.plan import load_calibration, save_calibration
    from autotune.worker.memory import memory_kind

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
        cal = calibrate(spec, cache_dir)
        save_calibration(store, name, key, cal.to_json())
        return cal


class Gate:
    def __init__(self, spec: StudySpec, store: Store, name: str, guard: RunGuard, cache_dir: str | None) -> None:
        from autotune.estimate.model import Correction, CostModel
        from autotune.estimate.probe import device_key

        self.spec, self.store, self.name, self.guard = spec, store, name, guard
        self.correction = Correction()
        self.t_start = time.monotonic()
        self.key = device_key(spec)
        self.cal = study_calibration(spec, store, name, cache_dir)
        self.model = CostModel(self.cal)
        self.limit, self.limit_source = memory_limit_mb(spec, self.cal)
        self.budget_s = spec.budget.study_time_s
        self.skips = 0

    def _predict(self, params: dict[str, Any]) -> Any:
        try:
            return self.model.predict(int(params["rank"]), int(params["batch_size"]))
        except KeyError:
            return None  # a batch size the probe did not lay out: no prediction

    def before(self, number: int, params: dict[str, Any]) -> TrialResult | None:
        """None: run the trial. A result: store it instead of running (nothing was trained)."""
        from autotune.storage.plan import mark_not_run, save_prediction

        raw = self._predict(params)
        if raw is None:
            return None
        self.correction = self._study_correction()
        pred = self.correction.apply(raw)
        save_prediction(self.store, self.name, number, pred.peak_memory_mb, pred.trial_time_s)
        if self.limit is not None and pred.peak_memory_mb > self.limit:
            mark_not_run(self.store, self.name, number)
            self.skips += 1
            if self._nothing_fits() or self.skips >= SKIP_LIMIT:
                self.guard.request(
                    f"stopped: every config of the search space is predicted above the memory limit "
                    f"({self.limit:.0f} MB, {self.limit_source})"
                    if self._nothing_fits()
                    else f"stopped: {self.skips} configs in a row predicted above the memory limit",
                    EXIT_STOPPED,
                )
            error = f"predicted {pred.peak_memory_mb:.0f} MB > limit {self.limit:.0f} MB ({self.limit_source})"
            return TrialResult(state=TrialState.OOM, error=error)
        self.skips = 0
        if self.budget_s is not None:
            left = self.budget_s - (time.monotonic() - self.t_start)
            if pred.trial_time_s > left:
                self.guard.request(
                    f"time budget: the next trial is predicted to take {pred.trial_time_s:.0f} s and "
                    f"{max(0.0, left):.0f} s of {self.budget_s:.0f} s are left",
                    0,
                )
                return TrialResult(state=TrialState.INTERRUPTED, error="not started: it would overrun the time budget")
        return None

    def _study_correction(self) -> Any:
        """The correction (estimate.model.Correction) learned from every complete trial of the
        study that ran on this kind of device, whichever worker or run trained it: a resumed study
        or a newly joined worker predicts with what the study has already measured."""
        from autotune.estimate.model import Correction
        from autotune.estimate.probe import trial_device_key

        c = Correction()
        for r in self.store.trials(self.name):
            if r["state"] != TrialState.COMPLETE.value or trial_device_key(r["device"], r["precision"]) != self.key:
                continue
            raw = self._predict(r["params"])
            if raw is not None:  # a peak measured another way (RSS) teaches nothing about this one
                same = r.get("memory_kind") == self.cal.memory_kind
                c.observe(raw, r["peak_memory_mb"] if same else None, r["wall_time_s"])
        return c

    def _nothing_fits(self) -> bool:
        from autotune.estimate.model import space_values

        assert self.limit is not None
        return all(
            self.correction.apply(self.model.predict(r, b)).peak_memory_mb > self.limit
            for r in space_values(self.spec, "rank")
            for b in space_values(self.spec, "batch_size")
        )


def make_gate(spec: StudySpec, store: Store, name: str, guard: RunGuard, cache_dir: str | None) -> Gate | None:
    """The Gate, or None when the calibration probe itself fails (an OOM at the largest config,
    a model the probe cannot train): the study then runs without predictions, as before."""
    import sys

    try:
        return Gate(spec, store, name, guard, cache_dir)
    except Exception as err:  # the probe is an optimisation: its failure must not stop the study
        first = (str(err).splitlines() or [""])[0][:160]
        print(
            f"autotune: calibration probe failed ({err.__class__.__name__}: {first}); no predictions", file=sys.stderr
        )
        return None


def final_stop(store: Store, name: str, guard: RunGuard, interrupted: bool) -> None:
    """No complete trial at all when the run ends: exit non-zero with the most common error."""
    from autotune.storage.plan import count_complete, most_common_error

    if interrupted or guard.stop is not None or count_complete(store, name):
        return
    common = most_common_error(store, name)
    why = f"{common[0]} ({common[1]} trial{'s' if common[1] > 1 else ''})" if common else "no trial ran"
    guard.request(f"no trial completed; most common error: {why}", EXIT_NO_COMPLETE)
