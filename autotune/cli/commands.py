"""One function per CLI command. Only ``run``/``resume``/``worker`` import the driver (optuna), and
only trials import torch; the inspection commands read autotune's tables alone."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from autotune.cli import use
from autotune.cli.bound_notes import edge_notes
from autotune.cli.report import cmd_report
from autotune.errors import StorageError
from autotune.storage import confirm
from autotune.storage.export import EXPORT_COLUMNS, PARAM_COLUMNS, export_rows
from autotune.storage.export import clean as _clean
from autotune.storage.url import redact, resolve_url
from autotune.text_table import render_table


def dispatch(args: argparse.Namespace) -> int:
    from autotune.cli.init import cmd_init
    from autotune.cli.running import cmd_resume, cmd_run, cmd_worker

    handler = {
        "run": cmd_run,
        "resume": cmd_resume,
        "worker": cmd_worker,
        "best": cmd_best,
        "studies": cmd_studies,
        "trials": cmd_trials,
        "export": cmd_export,
        "report": cmd_report,
        "validate": cmd_validate,
        "db": cmd_db,
        "train": use.cmd_train,
        "estimate": cmd_estimate,
        "init": cmd_init,
    }[args.command]
    return handler(args)


def _open_existing(url: str, study: str) -> Any:
    from autotune.storage import Store

    return Store.open_existing(url, study)  # reading never creates a database


def best_record(row: dict[str, Any]) -> dict[str, Any]:
    # after a confirmation phase: the mean, spread (max - min) and count of the runs at the target
    # budget that the recommendation rests on, where its adapter was kept, and (budget.confirm_hedge)
    # the search trial whose config it re-trained at a smaller learning rate
    keys = ("confirmed_score", "confirmed_spread", "confirmed_runs", "confirmed_accuracy", "adapter_dir", "hedge_of")
    confirmed: dict[str, Any] = {k: row[k] for k in keys if k in row}
    return {
        "trial": row["trial_number"],
        "score": row["score"],
        **confirmed,
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
        noise = confirm.noise_note(confirm.confirmed(store, args.study)) if row is not None else None
        if noise is not None:
            edges.append(noise)
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


STUDY_COLUMNS = ("name", "task", "model", "trials", "best_score", "best_accuracy", "created_at", "updated_at",
                 "workers_running")  # fmt: skip


def cmd_studies(args: argparse.Namespace) -> int:
    from autotune.storage import Store
    from autotune.storage.overview import overview

    url = resolve_url(args.storage)
    store = Store.open(url, create=False)  # creates nothing: a missing database is one line
    try:
        recs = overview(store)
    finally:
        store.close()
    if not recs:
        print(f"autotune: no studies in {redact(store.url)}", file=sys.stderr)
        return 0
    if args.format == "json":
        print(json.dumps([{k: _clean(v) for k, v in r.items()} for r in recs], indent=2))
        return 0
    flat = [
        {**{k: _clean(r[k]) for k in STUDY_COLUMNS}, "trials": " ".join(f"{s}={n}" for s, n in r["trials"].items())}
        for r in recs
    ]
    if args.format == "csv":
        import csv

        w = csv.DictWriter(sys.stdout, fieldnames=list(STUDY_COLUMNS))
        w.writeheader()
        w.writerows(flat)
    else:
        print(render_table(flat, STUDY_COLUMNS))
    return 0


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
        from autotune.storage.claims import worker_gone

        for r in rows:  # e.g. a run stopped by a full disk before it could store its trial's end
            if r["state"] == "running" and worker_gone(r["worker"]):
                print(
                    f"note: trial {r['trial_number']} is running, but its worker ({r['worker']}) is gone; "
                    f"`autotune resume {args.study}` runs it again",
                    file=sys.stderr,
                )
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
        _rank_note(path, spec)
        if not args.no_data:
            from autotune.inputs.check import check_inputs

            ex = check_inputs(spec)
            extra = f", {len(ex.labels)} labels" if ex.labels else ""
            print(
                f"{path}: ok (study '{spec.name}', {len(ex.train)} train / {len(ex.validation)} validation "
                f"examples{extra})"
            )
        else:
            print(f"{path}: ok (study '{spec.name}')")
    return 0


def _rank_note(path: str, spec: Any) -> None:
    """A GPU study (bf16/fp16) that searches ranks off tensor cores' multiples of 8."""
    rng = spec.search.rank
    ranks = (
        [int(v) for v in rng.choices]
        if rng.choices is not None
        else list(range(int(rng.low), int(rng.high) + 1, int(rng.step or 1)))
    )
    if spec.precision in ("bf16", "fp16") and not spec.lora.align_rank and any(r % 8 for r in ranks):
        odd = ", ".join(str(r) for r in ranks if r % 8)
        print(
            f"note: {path}: ranks {odd} are not multiples of 8, which tensor cores pad to anyway; "
            "lora.align_rank: 8 trains them as the next multiple",
            file=sys.stderr,
        )


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
