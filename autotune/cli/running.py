"""The commands that run a study: ``run``, ``resume``, ``worker``. They import the driver (optuna)
inside each function; the worker (torch) is imported only when the first trial starts."""

from __future__ import annotations

import argparse
import os
import sys

from autotune.cli.bound_notes import print_run_notes
from autotune.cli.limits import run_limits
from autotune.errors import EXIT_USER_ERROR, SpecError
from autotune.spec import StudySpec
from autotune.storage.url import redact, resolve_url
from autotune.study.limits import RunLimits
from autotune.study.summary import SUPERVISED_ENV, RunSummary, exit_code, summary_line


def _positive(n: int | None, flag: str) -> None:
    if n is not None and n < 1:
        raise SpecError(f"{flag} must be at least 1, got {n}")


def _finish(s: RunSummary, url: str) -> int:
    if s.stop_code == EXIT_USER_ERROR and s.stop_reason:
        raise SpecError(s.stop_reason)  # a property of the spec: the one-line user error
    supervised = os.environ.get(SUPERVISED_ENV) == "1"  # one of `run --workers N`'s: the parent sums up
    if not supervised:
        print(summary_line(s, redact(url)), file=sys.stderr)
    if s.stop_reason:
        print(f"autotune: {s.stop_reason}", file=sys.stderr)
    if not supervised:
        print_run_notes(url, s.study_name)  # a best at the edge of a searched range names the bound to widen
    return exit_code(s)


def _cpu_only(devices: str) -> None:
    # `--devices cpu` hides the GPUs from this process too, before torch is imported.
    if devices == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def cmd_run(args: argparse.Namespace) -> int:
    from autotune.spec import load_spec

    limits = run_limits(args)
    spec = limits.apply(load_spec(args.spec))
    _positive(args.n_trials, "--n-trials")
    _positive(args.workers, "--workers")
    url = resolve_url(args.storage)
    _cpu_only(args.devices)
    name = args.study_name or spec.name
    if args.warm_start:
        from autotune.study.warm_start import warm_start

        n = warm_start(spec, url, name, args.warm_start)
        print(f"warm start: {n} finished trials of '{args.warm_start}' seed the search", file=sys.stderr)
    s = _launch(args, url, name, spec, limits, args.n_trials)
    code = _finish(s, url)
    if spec.search.expand_bounds and not s.interrupted:
        from autotune.study.expand import expand_after

        # the follow-up studies run as this one did: in this process or with the same workers
        wide = expand_after(spec, url, s.study_name, lambda sp, nm, n: _launch(args, url, nm, sp, limits, n))
        if wide is not None:
            code = _finish(wide, url)
    return code


def cmd_resume(args: argparse.Namespace) -> int:
    _positive(args.n_trials, "--n-trials")
    _positive(args.workers, "--workers")
    limits = run_limits(args)
    url = resolve_url(args.storage)
    _cpu_only(args.devices)
    return _finish(_launch(args, url, args.study, None, limits, args.n_trials), url)


def cmd_worker(args: argparse.Namespace) -> int:
    _positive(args.n_trials, "--n-trials")
    url = resolve_url(args.storage)
    return _finish(_launch(args, url, args.study, None, run_limits(args), args.n_trials), url)


def _launch(
    args: argparse.Namespace, url: str, name: str, spec: StudySpec | None, limits: RunLimits, n_trials: int | None
) -> RunSummary:
    """``autotune.api.launch`` with the command's flags (``worker`` has no --workers/--devices)."""
    from autotune.api import launch

    return launch(url, name, spec, limits, n_trials, workers=getattr(args, "workers", 1),
                  devices=getattr(args, "devices", "auto"), show_progress=not args.no_progress,
                  cache_dir=args.cache_dir, backend=getattr(args, "backend", "local"),
                  address=getattr(args, "address", None), pack=getattr(args, "pack", None))  # fmt: skip
