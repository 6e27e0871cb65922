"""One function per CLI command. Only ``run``/``resume``/``worker`` import the driver (optuna), and
only trials import torch; the inspection commands read autotune's tables alone."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from autotune.cli import use
from autotune.cli.edges import edge_notes, print_run_notes
from autotune.cli.outcome import with_limits
from autotune.cli.report import cmd_report
from autotune.cli.table import render_table
from autotune.datasets import DataError
from autotune.session import EXIT_USER_ERROR, RunSummary, exit_code, summary_line
from autotune.spec import SEARCH_PARAMS, SpecError
from autotune.storage.url import StorageError, redact, resolve_url

# Errors that are the user's to fix: one line, exit 2. Database errors reach here as
# StorageError (translated once, in Store); anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (SpecError, DataError, StorageError, FileNotFoundError)

# One column per searchable parameter (empty where a study does not search it), from the registry.
PARAM_COLUMNS = tuple(SEARCH_PARAMS)

# CSV columns, in order: what a user asks of a trial afterwards.
EXPORT_COLUMNS = (
    "trial",
    "state",
    *PARAM_COLUMNS,
    "val_loss",
    "train_loss",
    "score",
    "accuracy",
    "wall_time_s",
    "predicted_time_s",
    "setup_time_s",
    "train_time_s",
    "eval_time_s",
    "peak_memory_mb",
    "predicted_memory_mb",
    "memory_kind",
    "samples_per_s",
    "tokens_per_s",
    "device",
    "precision",
    "optimizer_steps",
    "examples_seen",
    "retry_of",
    "params",
    "error",
    "started_at",
    "finished_at",
)


def dispatch(args: argparse.Namespace) -> int:
    handler = {
        "run": cmd_run,
        "resume": cmd_resume,
        "worker": cmd_worker,
        "best": cmd_best,
        "trials": cmd_trials,
        "export": cmd_export,
        "report": cmd_report,
        "validate": cmd_validate,
        "db": cmd_db,
        "train": use.cmd_train,
        "estimate": cmd_estimate,
    }[args.command]
    return handler(args)


def _positive(n: int | None, flag: str) -> None:
    if n is not None and n < 1:
        raise SpecError(f"{flag} must be at least 1, got {n}")


def _finish(s: RunSummary, url: str) -> int:
    if s.stop_code == EXIT_USER_ERROR and s.stop_reason:
        raise SpecError(s.stop_reason)  # a property of the spec: the one-line user error
    print(summary_line(s, redact(url)), file=sys.stderr)
    if s.stop_reason:
        print(f"autotune: {s.stop_reason}", file=sys.stderr)
    print_run_notes(url, s.study_name)  # a best at the edge of a searched range names the bound to widen
    return exit_code(s)


def _cpu_only(devices: str) -> None:
    # `--devices cpu` hides the GPUs from this process too, before torch is imported.
    if devices == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def cmd_run(args: argparse.Namespace) -> int:
    from autotune.spec import load_spec

    spec = with_limits(load_spec(args.spec), args)
    _positive(args.n_trials, "--n-trials")
    _positive(args.workers, "--workers")
    url = resolve_url(args.storage)
    from autotune import driver

    _cpu_only(args.devices)
    if args.warm_start:
        from autotune.warm_start import warm_start

        n = warm_start(spec, url, args.study_name or spec.name, args.warm_start)
        print(f"warm start: {n} finished trials of '{args.warm_start}' seed the search", file=sys.stderr)
    if args.workers > 1 or args.devices not in ("auto", "cpu"):
        from autotune.parallel import run_parallel

        s = run_parallel(
            spec,
            url,
            study_name=args.study_name,
            n_trials=args.n_trials,
            workers=args.workers,
            devices=args.devices,
            show_progress=not args.no_progress,
            cache_dir=args.cache_dir,
        )
        return _finish(s, url)
    s = driver.run_study(
        spec,
        url,
        study_name=args.study_name,
        n_trials=args.n_trials,
        show_progress=not args.no_progress,
        cache_dir=args.cache_dir,
    )
    code = _finish(s, url)
    if spec.search.expand_bounds and not s.interrupted:
        from autotune.expand import expand_after

        wide = expand_after(spec, url, s.study_name, show_progress=not args.no_progress, cache_dir=args.cache_dir)
        if wide is not None:
            code = _finish(wide, url)
    return code


def cmd_resume(args: argparse.Namespace) -> int:
    _positive(args.n_trials, "--n-trials")
    _positive(args.workers, "--workers")
    url = resolve_url(args.storage)
    from autotune import driver

    _cpu_only(args.devices)
    if args.workers > 1 or args.devices not in ("auto", "cpu"):
        from autotune.parallel import resume_parallel

        s = resume_parallel(
            url,
            args.study,
            n_trials=args.n_trials,
            workers=args.workers,
            devices=args.devices,
            show_progress=not args.no_progress,
            cache_dir=args.cache_dir,
        )
        return _finish(s, url)
    s = driver.resume_study(
        url, args.study, n_trials=args.n_trials, show_progress=not args.no_progress, cache_dir=args.cache_dir
    )
    return _finish(s, url)


def cmd_worker(args: argparse.Namespace) -> int:
    _positive(args.n_trials, "--n-trials")
    url = resolve_url(args.storage)
    from autotune import driver

    s = driver.resume_study(
        url, args.study, n_trials=args.n_trials, show_progress=not args.no_progress, cache_dir=args.cache_dir
    )
    return _finish(s, url)


def _open_existing(url: str, study: str) -> Any:
    from autotune.storage import Store

    return Store.open_existing(url, study)  # reading never creates a database


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def best_record(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "trial": row["trial_number"],
        "score": row["score"],
        "val_loss": row["val_loss"],
        "train_loss": row["train_loss"],
        "accuracy": row["accuracy"],
        "params": row["params"],
        "wall_time_s": row["wall_time_s"],
        "train_time_s": row["train_time_s"],
        "eval_time_s": row["eval_time_s"],
        "peak_memory_mb": row["peak_memory_mb"],
        "memory_kind": row["memory_kind"],
        "device": row["device"],
        "precision": row["precision"],
        "samples_per_s": row["samples_per_s"],
    }


def cmd_best(args: argparse.Namespace) -> int:
    if args.format in ("peft", "spec"):
        return use.print_answer(args)
    url = resolve_url(args.storage)
    store = _open_existing(url, args.study)
    try:
        row = store.best(args.study)
        edges = edge_notes(store, args.study, row["params"]) if row is not None else []
    finally:
        store.close()
    if row is None:
        raise StorageError(f"study '{args.study}' has no complete trial yet")
    rec = {k: _clean(v) for k, v in best_record(row).items()}
    rec["edges"] = edges
    if args.format == "json":
        print(json.dumps(rec, indent=2))
    elif args.format == "yaml":
        import yaml

        print(yaml.safe_dump(rec, sort_keys=False), end="")
    else:
        flat = {k: v for k, v in rec.items() if k not in ("params", "edges")}
        lines = [("study", args.study)] + [(k, _show(v)) for k, v in rec["params"].items()]
        lines += [(k, _show(v)) for k, v in flat.items() if v is not None]
        width = max(len(k) for k, _ in lines)
        for k, v in lines:
            print(f"{k:<{width}}  {v}")
        for note in edges:
            print(f"note: {note}")
    return 0


def _show(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def export_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        rec = {c: _clean(r.get(c)) for c in EXPORT_COLUMNS if c in r}
        rec.update({p: _clean(r["params"].get(p)) for p in PARAM_COLUMNS})
        rec["trial"] = r["trial_number"]
        rec["params"] = json.dumps(r["params"], sort_keys=True)
        out.append({c: rec.get(c) for c in EXPORT_COLUMNS})
    return out


def cmd_trials(args: argparse.Namespace) -> int:
    url = resolve_url(args.storage)
    store = _open_existing(url, args.study)
    try:
        rows = store.trials(args.study)
    finally:
        store.close()
    recs = export_rows(rows)
    if args.format == "json":
        print(json.dumps(recs, indent=2))
    elif args.format == "csv":
        import csv

        w = csv.DictWriter(sys.stdout, fieldnames=list(EXPORT_COLUMNS))
        w.writeheader()
        w.writerows(recs)
    else:
        searched = [p for p in PARAM_COLUMNS if any(r[p] is not None for r in recs)]
        cols = (
            "trial",
            "state",
            *searched,
            "score",
            "val_loss",
            "train_loss",
            "accuracy",
            "wall_time_s",
            "predicted_time_s",
            "peak_memory_mb",
            "predicted_memory_mb",
        )
        print(render_table([{c: r[c] for c in cols} for r in recs], cols))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.peft_config is not None:
        return use.export_peft_config(args)
    import pandas as pd

    url = resolve_url(args.storage)
    store = _open_existing(url, args.study)
    try:
        rows = store.trials(args.study)
    finally:
        store.close()
    df = pd.DataFrame(export_rows(rows), columns=list(EXPORT_COLUMNS))
    if args.csv == "-":
        df.to_csv(sys.stdout, index=False)
        return 0
    try:
        df.to_csv(args.csv, index=False)
    except OSError as err:
        raise StorageError(f"--csv {args.csv}: cannot write ({err.strerror})") from None
    print(f"wrote {len(df)} trial(s) to {args.csv}", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from autotune.spec import load_spec

    for path in args.spec:
        spec = load_spec(path)
        if not args.no_data:
            from autotune.inputs import check_inputs

            ex = check_inputs(spec)
            extra = f", {len(ex.labels)} labels" if ex.labels else ""
            print(
                f"{path}: ok (study '{spec.name}', {len(ex.train)} train / {len(ex.validation)} validation "
                f"examples{extra})"
            )
        else:
            print(f"{path}: ok (study '{spec.name}')")
    return 0


def cmd_estimate(args: argparse.Namespace) -> int:
    from autotune.cli.estimate import run_estimate

    return run_estimate(args)


def cmd_db(args: argparse.Namespace) -> int:
    from autotune.storage import Store
    from autotune.storage.migrate import current_revision, head_revision

    url = resolve_url(args.storage)
    if args.db_command == "upgrade":
        store = Store.open(url, create=True)
        rev = current_revision(store.engine)
        store.close()
        print(f"{redact(url)}: autotune tables at revision {rev} (head {head_revision()})")
        return 0
    store = Store.open(url, create=False)
    rev = current_revision(store.engine)
    store.close()
    print(f"{redact(url)}: revision {rev} (head {head_revision()})")
    return 0
