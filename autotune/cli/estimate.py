"""``autotune estimate SPEC``: every (rank, batch size) of the search space with its predicted peak
memory, step time and trial time, what does not fit, and the whole study's predicted time.

The base model loads once and a short calibration probe runs (autotune.costs.probe); torch is
imported only then, so this module stays light for ``autotune --help``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any


def add_estimate_parser(sub: Any) -> None:
    p = sub.add_parser("estimate", help="predict each config's peak memory and time before a study")
    p.add_argument("spec", help="study spec (YAML)")
    p.add_argument("--memory-limit", default=None, metavar="SIZE", help="mark configs above this (e.g. 20GiB)")
    p.add_argument("--workers", type=int, default=1, help="workers the study would run with (default: 1)")
    p.add_argument("--n-trials", type=int, default=None, help="trials in the study (default: the spec's n_trials)")
    p.add_argument("--cache-dir", default=None, help="tokenized-data cache (default: ~/.cache/autotune)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")


def run_estimate(args: argparse.Namespace) -> int:
    from autotune.cli.limits import with_limits
    from autotune.costs.calibration import CPU_SLACK
    from autotune.costs.study_plan import estimate_study
    from autotune.spec import load_spec

    spec = with_limits(load_spec(args.spec), args)
    est = estimate_study(spec, args.cache_dir, args.n_trials, args.workers)
    from autotune.worker.memory import CPU_ALLOCATED  # torch: loaded by the probe already

    cal, model, limit, source, preds = est.cal, est.model, est.limit_mb, est.limit_source, est.configs
    fraction, n_trials, total = est.budget_fraction, est.n_trials, est.study_time_s
    if args.format == "json":
        out = {
            "name": spec.name,
            "device": cal.device,
            "memory_kind": cal.memory_kind,
            "memory_limit_mb": limit,
            "memory_limit_source": source,
            "configs": [asdict(p) for p in preds],
            "study": {
                "n_trials": n_trials,
                "workers": args.workers,
                "expected_budget_fraction": fraction,
                "predicted_time_s": total,
            },
            "probe_s": cal.probe_s,
            "fit": {"memory_mb": list(model.mem), "step_s": list(model.time)},
        }
        print(json.dumps(out, indent=2))
        return 0
    _print_table(preds, limit, source, cal)
    n_fit = sum(1 for p in preds if p.fits is not False)
    print(
        f"\n{n_fit}/{len(preds)} configs fit. Study: {n_trials} trials with {args.workers} worker(s), "
        f"{spec.pruner.name} pruning (expected {fraction:.0%} of each trial's budget): about "
        f"{duration(total)} (probe took {cal.probe_s:.0f} s)"
    )
    if cal.memory_kind == CPU_ALLOCATED:
        # worker/memory.py: MiniLM trials' RSS above the baseline ran 2.5-3.2x their allocated peak
        print(
            f"note: on CPU memory is the bytes a trial allocates; the process's resident memory grows up to "
            f"{CPU_SLACK}x that (glibc's heap slack), which the default limit (available RAM / {CPU_SLACK}) allows for",
            file=sys.stderr,
        )
    return 0


def _print_table(preds: list[Any], limit: float | None, source: str, cal: Any) -> None:
    from autotune.text_table import render_table

    variants = len({p.variant for p in preds}) > 1  # the study searches placement or DoRA
    rows = [
        {
            "adapters": p.variant,
            "rank": p.rank,
            "batch_size": p.batch_size,
            "peak_memory_mb": round(p.peak_memory_mb, 1),
            "step_s": round(p.step_s, 3),
            "train_s": round(p.train_time_s, 1),
            "trial_s": round(p.trial_time_s, 1),
            "fits": "-" if p.fits is None else ("ckpt" if p.checkpointed else "yes") if p.fits else "NO",
        }
        for p in preds
    ]
    where = "no limit" if limit is None else f"limit {limit:.0f} MB ({source})"
    print(f"predicted on {cal.device} ({cal.memory_kind}), {where}", file=sys.stderr)
    cols = ("rank", "batch_size", "peak_memory_mb", "step_s", "train_s", "trial_s", "fits")
    print(render_table(rows, (("adapters", *cols) if variants else cols)))


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
