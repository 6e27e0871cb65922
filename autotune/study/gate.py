"""The gate: the driver asks it before each trial whether to spend the trial at all.

- ``Gate``: predictions from the calibration probe. Under ``memory.gradient_checkpointing: auto``
  a config predicted above the limit without checkpointing and under it with checkpointing runs
  with it (``checkpointed``); otherwise a config predicted above the memory limit is
  not run (stored ``oom``, "predicted N MB > limit M MB", marked ``not_run`` so it does not count
  toward n_trials); a trial whose predicted time would overrun the study's time budget is not
  started and the run ends; every trial run gets its prediction stored beside its measurement.

The probe and the memory limit it is checked against are in ``autotune.costs.calibration``.
"""

from __future__ import annotations

import time
from typing import Any

from autotune.costs.calibration import RemoteProbe, memory_limit_mb, study_calibration
from autotune.errors import EXIT_STOPPED
from autotune.spec import StudySpec
from autotune.storage import Store
from autotune.study.guard import RunGuard
from autotune.trial import TrialResult, TrialState

SKIP_LIMIT = 20  # consecutive configs not run by prediction before the run gives up


class Gate:
    def __init__(
        self,
        spec: StudySpec,
        store: Store,
        name: str,
        guard: RunGuard,
        cache_dir: str | None,
        remote: RemoteProbe | None = None,
    ) -> None:
        from autotune.costs.model import Correction, CostModel

        self.spec, self.store, self.name, self.guard = spec, store, name, guard
        self.correction = Correction()
        self.t_start = time.monotonic()
        if remote is None:
            from autotune.costs.probe import device_key

            self.key = device_key(spec)
        else:  # the trials run elsewhere (--backend ray): so does the probe
            self.key = remote.device_key(spec)
        self.cal = study_calibration(spec, store, name, cache_dir, remote)
        self.model = CostModel(self.cal)
        self.limit, self.limit_source = memory_limit_mb(spec, self.cal)
        self.budget_s = spec.budget.study_time_s
        self.skips = 0
        self.auto = spec.memory.gradient_checkpointing == "auto" and self.model.predicts_checkpointed
        self.checkpointed: set[int] = set()  # trials that auto turned checkpointing on for

    def predict(self, params: dict[str, Any], checkpointed: bool = False) -> Any:
        """The raw prediction (no study correction) for a trial's params; None off the probe's batches."""
        from autotune.costs.model import variant_key

        lora = self.spec.lora  # a searched placement or DoRA is predicted from its own probe points
        variant = variant_key(params.get("target_modules", lora.target_modules), params.get("use_dora", lora.use_dora))
        try:
            return self.model.predict(int(params["rank"]), int(params["batch_size"]), checkpointed, variant)
        except KeyError:
            return None  # a batch size the probe did not lay out: no prediction

    def _fits_only_checkpointed(self, params: dict[str, Any], plain: Any) -> Any:
        """auto: the checkpointed prediction when it is under the limit and the plain one is not."""
        if not self.auto or self.limit is None or plain.peak_memory_mb <= self.limit:
            return None
        raw = self.predict(params, checkpointed=True)
        pred = self.correction.apply(raw) if raw is not None else None
        return pred if pred is not None and pred.peak_memory_mb <= self.limit else None

    def before(self, number: int, params: dict[str, Any]) -> TrialResult | None:
        """None: run the trial. A result: store it instead of running (nothing was trained)."""
        from autotune.storage.plan import mark_not_run, save_prediction

        raw = self.predict(params)
        if raw is None:
            return None
        self.correction = self._study_correction()
        pred = self.correction.apply(raw)
        flipped = self._fits_only_checkpointed(params, pred)
        if flipped is not None:
            pred = flipped
            self.checkpointed.add(number)
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
        """The correction (costs.model.Correction) learned from every complete trial of the
        study that ran on this kind of device, whichever worker or run trained it: a resumed study
        or a newly joined worker predicts with what the study has already measured."""
        from autotune.costs.model import Correction
        from autotune.costs.probe import trial_device_key

        c = Correction()
        for r in self.store.trials(self.name):
            if r["state"] != TrialState.COMPLETE.value or trial_device_key(r["device"], r["precision"]) != self.key:
                continue
            raw = self.predict(r["params"], bool(r.get("gradient_checkpointing")) and self.auto)
            if raw is not None:  # a peak measured another way (RSS) teaches nothing about this one
                same = r.get("memory_kind") == self.cal.memory_kind
                c.observe(raw, r["peak_memory_mb"] if same else None, r["wall_time_s"])
        return c

    def _nothing_fits(self) -> bool:
        from autotune.costs.model import space_values

        assert self.limit is not None
        return all(
            self.correction.apply(self.model.predict(r, b, ckpt, v)).peak_memory_mb > self.limit
            for v in self.model.variants
            for r in space_values(self.spec, "rank")
            for b in space_values(self.spec, "batch_size")
            for ckpt in ((False, True) if self.auto else (False,))
        )


def make_gate(
    spec: StudySpec, store: Store, name: str, guard: RunGuard, cache_dir: str | None, remote: RemoteProbe | None = None
) -> Gate | None:
    """The Gate, or None: when the calibration probe itself fails (an OOM at the largest config,
    a model the probe cannot train), the study then runs without predictions, as before; and when
    nothing asked for a check and no prediction could change a decision (a pinned config; a CPU
    study whose largest config fits, ``costs.calibration.fits_without_predictions``)."""
    import sys

    asked = spec.budget.study_time_s is not None or spec.budget.memory_limit_mb is not None
    unasked = not asked and spec.memory.gradient_checkpointing != "auto"
    if _one_config(spec) and unasked:
        # a pinned config (`best --format spec`, a confirmation study): there is no choice for a
        # prediction to make, and the probe costs 10-20 s on the quickstart (issue 20); an OOM is
        # still stored as oom. With a limit or a time budget the user asked for the check: it runs.
        return None
    try:
        if unasked and remote is None:
            from autotune.costs.calibration import fits_without_predictions
            from autotune.costs.probe import device_key
            from autotune.storage.plan import load_calibration

            # a study that probed before (resume) predicts for free from the stored probe
            if load_calibration(store, name, device_key(spec)) is None and fits_without_predictions(spec, cache_dir):
                return None
        return Gate(spec, store, name, guard, cache_dir, remote)
    except Exception as err:  # the probe is an optimisation: its failure must not stop the study
        first = (str(err).splitlines() or [""])[0][:160]
        print(
            f"autotune: calibration probe failed ({err.__class__.__name__}: {first}); no predictions", file=sys.stderr
        )
        return None


def _one_config(spec: StudySpec) -> bool:
    """True when the search space holds a single configuration."""
    from optuna.distributions import CategoricalDistribution

    from autotune.search.space import distributions

    for d in distributions(spec).values():
        if isinstance(d, CategoricalDistribution):
            if len(d.choices) > 1:
                return False
        elif getattr(d, "low", None) != getattr(d, "high", None):
            return False
    return True
