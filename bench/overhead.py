"""Share of trial wall time spent outside training and evaluation, on the quickstart study.

Runs the study in this process (imports are paid before the clock starts: they are process
start-up, not trial overhead) into a fresh SQLite file with cold data and tokenization caches, and
measures from the driver's point of view: total time of the run against the sum of the train and
eval time of its trials. Everything else (model load, adapters, data, sampler, storage) is
overhead. Writes bench/results/overhead.json and ends with:

    overhead_share=Z

Run: python bench/overhead.py [--spec studies/quickstart.yaml] [--n-trials 8] [--probe]

Where the time went on a 2-core VM (2026-12-02; ~2.2-2.5 s of overhead in a 75-90 s run),
timed by wrapping each phase:
- building the stdlib docstring set, once per machine: 0.45-0.65 s. It was 1.7 s while every
  syntax tree set off full collections of the ~460k objects torch and friends leave tracked
  (0.25 s each); the driver now freezes those (gc.freeze) and the build runs with the collector
  off and walks statements only.
- the first trial's set-up: tokenizer 0.05 s, tokenization 0.15 s, MiniLM load 0.12 s.
- per trial: malloc_trim before the memory baseline 35-100 ms (it grows with the heap the last
  trial freed), peft adapters on and off 35-45 ms, Optuna ask/report/should_prune/tell 30-40 ms.
- Optuna's study set-up 0.15-0.2 s (its alembic stamp of a new database).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=str(Path(__file__).parents[1] / "studies" / "quickstart.yaml"))
    ap.add_argument("--n-trials", type=int, default=None)
    ap.add_argument(
        "--warm",
        action="store_true",
        help="measure a second run of the study, with the data and tokenization caches the first made",
    )
    ap.add_argument("--confirm-top", type=int, default=None,
                    help="the spec's budget.confirm_top (0: the search alone, the default before 2026-12-05); "
                    "writes overhead_confirmN.json")  # fmt: skip
    ap.add_argument(
        "--probe",
        action="store_true",
        help="set budget.memory_limit_mb to 1e6 MB: a limit asks for the calibration probe, which a CPU "
        "study without one skips since 2026-12-06 (study/gate.make_gate); writes overhead*_probe.json",
    )
    ap.add_argument("--out", default=None, help="write the JSON here instead of bench/results/overhead*.json")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    # Import everything a run needs before timing: process start-up is not trial overhead.
    import optuna.storages._rdb.models  # noqa: F401  # Optuna imports its ORM on first use: 0.12 s
    import peft  # noqa: F401
    import transformers  # noqa: F401

    import autotune.worker.run_trial  # noqa: F401
    from autotune.spec import load_spec
    from autotune.storage import Store
    from autotune.study.driver import run_study

    spec = load_spec(args.spec)
    if args.confirm_top is not None:
        spec = spec.model_copy(update={"budget": spec.budget.model_copy(
            update={"confirm_top": args.confirm_top, "keep_adapters": min(spec.budget.keep_adapters, args.confirm_top)}
        )})  # fmt: skip
    if args.probe:
        spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"memory_limit_mb": 1e6})})
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AUTOTUNE_ADAPTERS_DIR"] = f"{tmp}/adapters"  # the kept adapter (budget.keep_adapters)
        # Cold caches, as on a user's first run: the built-in data and the tokenized data are
        # both made inside the measured run.
        os.environ["AUTOTUNE_CACHE_DIR"] = f"{tmp}/cache"
        url = f"sqlite:///{tmp}/overhead.db"
        if args.warm:  # a first run fills the caches; the second, measured, run reads them
            run_study(
                spec, f"sqlite:///{tmp}/first.db", n_trials=args.n_trials, show_progress=False, cache_dir=f"{tmp}/cache"
            )
        start = time.perf_counter()
        summary = run_study(spec, url, n_trials=args.n_trials, show_progress=False, cache_dir=f"{tmp}/cache")
        total = time.perf_counter() - start
        store = Store.open(url, create=False)
        rows = store.trials(summary.study_name)
        store.close()
    train = sum(r["train_time_s"] or 0.0 for r in rows)
    evals = sum(r["eval_time_s"] or 0.0 for r in rows)
    trial_wall = sum(r["wall_time_s"] or 0.0 for r in rows)
    share = (total - train - evals) / total
    out = {
        "spec": args.spec,
        "caches": "warm" if args.warm else "cold",
        "probe": "asked (memory_limit_mb 1e6)" if args.probe else "the default",
        "trials": len(rows),
        "confirmation_runs": sum(r["confirm_of"] is not None for r in rows),
        "run_wall_s": total,
        "train_s": train,
        "eval_s": evals,
        "sum_trial_wall_s": trial_wall,
        "overhead_s": total - train - evals,
        "overhead_share": share,
        "inside_trials_share": (trial_wall - train - evals) / total,
        "best_score": summary.best_score,
        "best_accuracy": max((r["accuracy"] or 0.0 for r in rows if r["state"] == "complete"), default=None),
    }
    RESULTS.mkdir(exist_ok=True)
    suffix = ("" if args.confirm_top is None else f"_confirm{args.confirm_top}") + ("_probe" if args.probe else "")
    Path(args.out or RESULTS / f"overhead{suffix}.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    print(f"overhead_share={share:.4f}")


if __name__ == "__main__":
    main()
