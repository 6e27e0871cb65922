"""`autotune train`: train the best (or a chosen, or the top K) stored configurations at a longer
budget, check that the short-budget ranking holds, and save a real peft adapter.

Orchestration only: reads the study, writes ``autotune_fits``, lays out the output directory.
The training itself is the worker's trial recipe (``autotune.worker.fit``), imported lazily so
that a bad flag or an unknown trial answers before torch loads. Fits run one after another in
this process, on one device.

The output appears all at once: everything is written to a hidden sibling directory and renamed
to ``--out`` at the end, so Ctrl-C (stored as ``interrupted``) or a crash leaves no half-written
adapter behind.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from autotune.errors import EXIT_INTERRUPTED, EXIT_UNFINISHED, EXIT_USER_ERROR, FitError, SpecError, StorageError
from autotune.handoff.train_layout import Fit, layout, summary
from autotune.inputs.check import check_inputs
from autotune.interrupt import TwoStageStop
from autotune.spec import StudySpec, parse_spec_yaml
from autotune.storage import Store
from autotune.storage import fits as fitdb
from autotune.trial import TrialConfig, TrialResult, TrialState, trial_config


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    trial: int | None = None
    top: int = 1
    train_examples: int | None = None
    epochs: float | None = None
    cache_dir: str | None = None
    merge: bool = False  # also write the base model with the best adapter merged in (DIR/merged)


def load_trained(path: str | Path, device: str = "cpu") -> tuple[Any, Any, dict[str, Any]]:
    """(peft model in eval mode, tokenizer, provenance) from a directory `autotune train` wrote:
    the base model is loaded (a tiny one rebuilt from its config and seed) and the adapter put on
    it with ``PeftModel.from_pretrained``. Imports torch."""
    from autotune.worker.fit import load_trained as _load

    return _load(path, device)


def _check(opts: TrainOptions, out: Path) -> None:
    if opts.top < 1:
        raise SpecError(f"--top must be at least 1, got {opts.top}")
    if opts.trial is not None and opts.top != 1:
        raise SpecError("give --trial or --top, not both")
    if opts.train_examples is not None and opts.epochs is not None:
        raise SpecError("give --train-examples or --epochs, not both")
    if opts.train_examples is not None and opts.train_examples < 1:
        raise SpecError(f"--train-examples must be at least 1, got {opts.train_examples}")
    if opts.epochs is not None and not (opts.epochs > 0 and math.isfinite(opts.epochs)):
        raise SpecError(f"--epochs must be above 0, got {opts.epochs}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SpecError(f"--out {out}: already exists and is not an empty directory")
    if not out.parent.is_dir():
        raise SpecError(f"--out {out}: no such directory {out.parent}")


def _pick(store: Store, study: str, opts: TrainOptions) -> list[dict[str, Any]]:
    if opts.trial is not None:
        row = fitdb.trial_row(store, study, opts.trial)
        if not row["params"]:
            raise StorageError(f"trial {opts.trial} of study '{study}' has no params")
        return [row]
    rows = fitdb.top_complete(store, study, opts.top)
    if not rows:
        raise StorageError(f"study '{study}' has no complete trial yet")
    if len(rows) < opts.top:
        print(f"autotune: study '{study}' has {len(rows)} complete trial(s); training those", file=sys.stderr)
    return rows


def _budget(opts: TrainOptions, n_train: int, target: int | None) -> int:
    if opts.train_examples is not None:
        return opts.train_examples
    if opts.epochs is None and target is not None:
        return target  # the spec's budget.target_examples: what the study was tuned for
    return max(1, round((opts.epochs or 1.0) * n_train))  # default: one pass over the training split


def train(url: str, study: str, out: Path, opts: TrainOptions) -> int:
    """Run the fits and write ``out``; return the exit status. User errors raise one line."""
    out = out.expanduser().absolute()
    _check(opts, out)
    store = Store.open(url, create=False)  # never create a database here: the study must exist
    try:
        row = store.require_study(study)
        store.upgrade()  # the fits table arrived in revision 0002_train
        spec = parse_spec_yaml(row.spec_yaml, f"stored spec of {study}")
        chosen = _pick(store, study, opts)
        examples = check_inputs(spec)
        n_train = len(examples.train)
        budget = _budget(opts, n_train, spec.budget.target_examples)
        labels = list(examples.labels) if examples.labels else None
        return _run(store, study, spec, chosen, budget, n_train, labels, out, opts)
    finally:
        store.close()


def _fit_config(spec: StudySpec, params: dict[str, Any], budget: int, cache_dir: str | None) -> TrialConfig:
    # One evaluation at the end, over the whole validation split, with no timeout.
    long = spec.budget.model_copy(
        update={"train_examples": budget, "evals": 1, "max_eval_examples": None, "timeout_s": None}
    )
    return trial_config(spec.model_copy(update={"budget": long}), params, cache_dir)


def _run(
    store: Store,
    study: str,
    spec: StudySpec,
    chosen: list[dict[str, Any]],
    budget: int,
    n_train: int,
    labels: list[str] | None,
    out: Path,
    opts: TrainOptions,
) -> int:
    import warnings

    from autotune.worker.fit import fit  # torch, transformers, peft: only now

    # peft calls a transformers API deprecated in transformers 5; nothing for a user to act on.
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)

    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    fits: list[Fit] = []
    stop = TwoStageStop(on_first=_say_stopping)
    try:
        with stop.installed():
            event = stop.event
            for row in chosen:
                if event.is_set():
                    break
                cfg = _fit_config(spec, row["params"], budget, opts.cache_dir)
                f = Fit(row, cfg, fitdb.fit_started(store, study, row["trial_number"], row["params"], budget))
                fits.append(f)
                print(
                    f"autotune: training trial {row['trial_number']} ({_params(row)}) on {budget} examples "
                    f"({budget / n_train:.3g} epochs)",
                    file=sys.stderr,
                )
                f.path = tmp / "candidates" / f"trial-{row['trial_number']}"
                f.result = fit(f.config, f.path, event)
                fitdb.fit_finished(store, f.fit_id, f.result)
                _raise_if_fatal(f)
        if stop.event.is_set():
            print(f"autotune: interrupted; nothing was written to {out}", file=sys.stderr)
            return EXIT_INTERRUPTED
        done = [f for f in fits if f.result is not None and f.result.state == TrialState.COMPLETE]
        if not done:
            f = fits[-1]
            assert f.result is not None
            raise FitError(
                f"trial {f.trial['trial_number']}: the fit ended {f.result.state.value}: {_first_line(f.result.error)}",
                EXIT_UNFINISHED,
            )
        best = min(done, key=lambda f: (f.result.score, f.trial["trial_number"]))  # type: ignore[union-attr]
        layout(tmp, out, fits, best, study, spec, budget, n_train, labels)
        if opts.merge:
            from autotune.worker.fit import MERGED, save_merged

            save_merged(tmp, tmp / MERGED)  # before the rename: the output still appears all at once
        if out.exists():
            out.rmdir()  # an empty directory given as --out (checked at the start)
        os.replace(tmp, out)
        for f in done:
            fitdb.fit_saved(store, f.fit_id, str(out if f is best else out / "candidates" / f.path.name))  # type: ignore[union-attr]
        print(summary(fits, best, out))
        return 0
    except KeyboardInterrupt:
        print(f"autotune: interrupted; nothing was written to {out}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        for f in fits:  # a fit still open here was stopped by a second Ctrl-C or an error
            if f.result is None:
                fitdb.fit_finished(store, f.fit_id, TrialResult(TrialState.INTERRUPTED, error="interrupted"))
        shutil.rmtree(tmp, ignore_errors=True)


def _say_stopping() -> None:
    print("autotune: stopping at the next step (Ctrl-C again to stop at once)", file=sys.stderr)


def _raise_if_fatal(f: Fit) -> None:
    r = f.result
    assert r is not None
    if r.state == TrialState.OOM:
        raise FitError(
            f"trial {f.trial['trial_number']} (batch size {f.config.batch_size}, {r.device}): "
            f"{_first_line(r.error)}; the fit is stored as oom",
            EXIT_USER_ERROR,  # the config does not fit: a property of what was asked
        )


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:200] if text and text.strip() else "no message"


def _params(row: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row["params"].items())
