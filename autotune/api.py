"""The Python API: what the commands do, from a notebook or a script.

    import autotune
    study = autotune.run("studies/quickstart.yaml", storage="sqlite:///autotune.db", n_trials=8)
    study.best, study.trials, study.optuna, study.report("r.html"), study.train("out", top=3)
    autotune.load("quickstart", storage=...)      # an existing study, nothing created
    autotune.estimate("studies/quickstart.yaml")   # the `estimate` table as a DataFrame

The CLI's run/resume/worker go through ``launch`` here; `best`, `trials`, `export`, `report`,
`train` and `estimate` call the same functions this module calls, so there is one code path per
command. Errors are the package's typed exceptions (autotune.errors: SpecError, DataError,
StorageError, FitError, ...) with the one-line messages the CLI prints. Ctrl-C during ``run``
stops the study as in the CLI (the running trial is stored ``interrupted`` and re-queued) and
returns the Study; the kernel keeps running. Importing this module loads neither torch nor optuna.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USER_ERROR, FitError, SpecError, StorageError
from autotune.spec import StudySpec, load_spec, parse_spec
from autotune.storage import Store
from autotune.storage.url import redact, resolve_url
from autotune.study.limits import RunLimits
from autotune.study.summary import RunSummary, summary_line

if TYPE_CHECKING:
    import optuna
    import pandas as pd

    from autotune.report import ReportSummary

SpecLike = str | Path | dict[str, Any] | StudySpec


@dataclass(frozen=True)
class BestTrial:
    """A study's recommendation. After a confirmation phase (budget.confirm_top) the
    ``confirmed_*`` fields hold the mean, spread (max - min) and number of its runs at the target
    budget, and ``adapter_dir`` the kept adapter (budget.keep_adapters)."""

    number: int
    params: dict[str, Any]
    score: float
    val_loss: float | None
    train_loss: float | None
    accuracy: float | None
    wall_time_s: float | None
    peak_memory_mb: float | None
    confirmed_score: float | None = None
    confirmed_spread: float | None = None
    confirmed_runs: int | None = None
    adapter_dir: str | None = None


def _spec(spec: SpecLike) -> StudySpec:
    if isinstance(spec, StudySpec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(spec, "spec")
    return load_spec(str(spec))


def launch(
    url: str,
    name: str,
    spec: StudySpec | None,
    limits: RunLimits,
    n_trials: int | None,
    *,
    workers: int = 1,
    devices: str = "auto",
    show_progress: bool = True,
    cache_dir: str | None = None,
    backend: str = "local",
    address: str | None = None,
    pack: bool | None = None,
) -> RunSummary:
    """Run study ``name`` (new from ``spec``, or the stored one when ``spec`` is None) in this
    process, or with N worker processes when ``workers``/``devices`` ask for them, or on a Ray
    cluster (``backend="ray"``, at ``address``; ``pack``: several trials per GPU by predicted memory)."""
    if backend == "ray":
        from autotune.study import ray_backend

        opts = ray_backend.RayOptions(address=address, pack=pack, workers=workers)
        return ray_backend.run(url, name, spec, limits, n_trials, opts, show_progress, cache_dir)  # type: ignore[no-any-return]
    if backend != "local":
        raise SpecError(f"backend: expected local or ray, got {backend!r}")
    if workers > 1 or devices not in ("auto", "cpu"):
        from autotune.study.parallel import run_parallel

        return run_parallel(url, name, spec=spec, n_trials=n_trials, workers=workers, devices=devices,
                            show_progress=show_progress, cache_dir=cache_dir, limits=limits)  # fmt: skip
    from autotune.study import driver

    if spec is None:
        return driver.resume_study(
            url, name, n_trials=n_trials, show_progress=show_progress, cache_dir=cache_dir, limits=limits
        )
    return driver.run_study(
        spec, url, study_name=name, n_trials=n_trials, show_progress=show_progress, cache_dir=cache_dir, limits=limits
    )


def _positive(n: int | None, what: str) -> None:
    if n is not None and n < 1:
        raise SpecError(f"{what} must be at least 1, got {n}")


def _finished(s: RunSummary, url: str) -> None:
    if s.stop_code == EXIT_USER_ERROR and s.stop_reason:
        raise SpecError(s.stop_reason)  # a property of the spec: the CLI's one-line user error
    print(summary_line(s, redact(url)), file=sys.stderr)
    if s.stop_reason:
        print(f"autotune: {s.stop_reason}", file=sys.stderr)


def run(
    spec: SpecLike,
    storage: str | None = None,
    n_trials: int | None = None,
    *,
    study_name: str | None = None,
    workers: int = 1,
    devices: str = "auto",
    time_budget_s: float | None = None,
    memory_limit_mb: float | None = None,
    show_progress: bool = True,
    cache_dir: str | None = None,
    backend: str = "local",
    address: str | None = None,
    pack: bool | None = None,
) -> Study:
    """Create (or continue) the study of ``spec`` (a YAML path, a dict or a StudySpec) in
    ``storage`` (default: $AUTOTUNE_STORAGE, else sqlite:///autotune.db) and run it to ``n_trials``
    finished trials (default: the spec's), as `autotune run`. Returns the Study, also after a
    Ctrl-C (the interrupted trial is re-queued: ``Study.resume`` or `autotune resume` finishes).
    ``backend="ray"`` runs the trials on a Ray cluster (``address``; ``pack``), as `--backend ray`."""
    _positive(n_trials, "n_trials")
    _positive(workers, "workers")
    limits = RunLimits(study_time_s=time_budget_s, memory_limit_mb=memory_limit_mb)
    s = limits.apply(_spec(spec))
    url = resolve_url(storage)
    name = study_name or s.name
    summary = launch(url, name, s, limits, n_trials, workers=workers, devices=devices, show_progress=show_progress,
                     cache_dir=cache_dir, backend=backend, address=address, pack=pack)  # fmt: skip
    _finished(summary, url)
    return Study(name, url)


def load(name: str, storage: str | None = None) -> Study:
    """The stored study ``name``; StorageError (one line) when the database or the study does not
    exist. Creates nothing."""
    url = resolve_url(storage)
    Store.open_existing(url, name).close()
    return Study(name, url)


def estimate(
    spec: SpecLike,
    *,
    n_trials: int | None = None,
    workers: int = 1,
    memory_limit_mb: float | None = None,
    cache_dir: str | None = None,
) -> pd.DataFrame:
    """`autotune estimate`'s table: one row per (rank, batch size) with its predicted peak memory,
    step, train and trial time and whether it fits the limit. ``df.attrs`` holds the limit, its
    source, the device and the whole study's predicted time (``study_time_s``). Runs the probe."""
    import pandas as pd

    from autotune.costs.study_plan import estimate_study

    s = RunLimits(memory_limit_mb=memory_limit_mb).apply(_spec(spec))
    est = estimate_study(s, cache_dir, n_trials, workers)
    df = pd.DataFrame(
        [
            {"rank": p.rank, "batch_size": p.batch_size, "peak_memory_mb": p.peak_memory_mb, "step_s": p.step_s,
             "train_s": p.train_time_s, "trial_s": p.trial_time_s, "fits": p.fits, "checkpointed": p.checkpointed}
            for p in est.configs
        ]
    )  # fmt: skip
    df.attrs.update(
        memory_limit_mb=est.limit_mb, memory_limit_source=est.limit_source, device=est.cal.device,
        n_trials=est.n_trials, workers=est.workers, study_time_s=est.study_time_s,
    )  # fmt: skip
    return df


class Study:
    """A stored study: every property reads the database when asked (a study other workers are
    running changes between two reads)."""

    def __init__(self, name: str, storage: str) -> None:
        self.name = name
        self.storage = storage

    def __repr__(self) -> str:
        return f"Study({self.name!r}, storage={redact(Store.open_existing(self.storage, self.name).url)!r})"

    def _store(self) -> Store:
        return Store.open_existing(self.storage, self.name)

    @property
    def best(self) -> BestTrial | None:
        """The recommendation (as `autotune best`), or None before any trial completed."""
        store = self._store()
        try:
            row = store.best(self.name)
        finally:
            store.close()
        if row is None:
            return None
        return BestTrial(
            number=row["trial_number"], params=row["params"], score=row["score"], val_loss=row["val_loss"],
            train_loss=row["train_loss"], accuracy=row["accuracy"], wall_time_s=row["wall_time_s"],
            peak_memory_mb=row["peak_memory_mb"], confirmed_score=row.get("confirmed_score"),
            confirmed_spread=row.get("confirmed_spread"), confirmed_runs=row.get("confirmed_runs"),
            adapter_dir=row.get("adapter_dir"),
        )  # fmt: skip

    @property
    def trials(self) -> pd.DataFrame:
        """One row per trial, the columns of `export --csv`."""
        import pandas as pd

        from autotune.storage.export import EXPORT_COLUMNS, export_rows

        store = self._store()
        try:
            rows = store.trials(self.name)
        finally:
            store.close()
        return pd.DataFrame(export_rows(rows), columns=list(EXPORT_COLUMNS))

    @property
    def optuna(self) -> optuna.Study:
        """The Optuna study beside autotune's tables, for Optuna's own plots and tools."""
        import optuna as _optuna

        from autotune.storage.engine import engine_kwargs
        from autotune.storage.url import parse_url, url_string

        url = parse_url(self.storage)
        storage = _optuna.storages.RDBStorage(
            url_string(url), engine_kwargs=engine_kwargs(url), skip_table_creation=True
        )
        return _optuna.load_study(study_name=self.name, storage=storage)

    def resume(
        self,
        n_trials: int | None = None,
        *,
        workers: int = 1,
        show_progress: bool = True,
        backend: str = "local",
        address: str | None = None,
    ) -> Study:
        """Continue the study to ``n_trials`` finished trials (default: its spec's), as `resume`
        (``backend="ray"``: on a Ray cluster at ``address``, as `resume --backend ray`)."""
        _positive(n_trials, "n_trials")
        summary = launch(self.storage, self.name, None, RunLimits(), n_trials, workers=workers,
                         show_progress=show_progress, backend=backend, address=address)  # fmt: skip
        _finished(summary, self.storage)
        return self

    def report(self, path: str | Path, png_dir: str | Path | None = None) -> ReportSummary:
        """Write the HTML report (as `autotune report`)."""
        from autotune.report import write_report

        return write_report(self.storage, self.name, path, png_dir)

    def train(
        self,
        out: str | Path,
        *,
        top: int = 1,
        trial: int | None = None,
        train_examples: int | None = None,
        epochs: float | None = None,
        merge: bool = False,
        cache_dir: str | None = None,
    ) -> Path:
        """Train the best (or ``top`` best, or ``trial``) config at the target budget and save the
        adapter to ``out``, as `autotune train`; returns ``out``. FitError when no adapter came of
        it, KeyboardInterrupt after a Ctrl-C (nothing is written then)."""
        from autotune.handoff.train import TrainOptions
        from autotune.handoff.train import train as train_fits

        opts = TrainOptions(trial=trial, top=top, train_examples=train_examples, epochs=epochs,
                            cache_dir=cache_dir, merge=merge)  # fmt: skip
        code = train_fits(self.storage, self.name, Path(out), opts)
        if code == EXIT_INTERRUPTED:
            raise KeyboardInterrupt
        if code != EXIT_OK:
            raise FitError(f"study '{self.name}': no adapter was saved to {out} (see the lines above)", code)
        return Path(out).expanduser().absolute()


__all__ = ["BestTrial", "SpecLike", "StorageError", "Study", "estimate", "launch", "load", "run"]
