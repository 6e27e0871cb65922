"""The commands that run a study: ``run``, ``resume``, ``worker``. They import the driver (optuna)
inside each function; the worker (torch) is imported only when the first trial starts."""

from __future__ import annotations

import argparse
import os
import sys

from autotune.cli.edges import print_run_notes
from autotune.cli.outcome import run_limits
from autotune.limits import RunLimits
from autotune.session import EXIT_USER_ERROR, RunSummary, exit_code, summary_line
from autotune.spec import SpecError
from autotune.storage.url import redact, resolve_url


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

    limits = run_limits(args)
    spec = limits.apply(load_spec(args.spec))
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
            limits=limits,
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
    limits = run_limits(args)
    url = resolve_url(args.storage)
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
            limits=limits,
        )
        return _finish(s, url)
    return _one_worker(args, url, limits)


def cmd_worker(args: argparse.Namespace) -> int:
    _positive(args.n_trials, "--n-trials")
    return _one_worker(args, resolve_url(args.storage), run_limits(args))


def _one_worker(args: argparse.Namespace, url: str, limits: RunLimits) -> int:
    """Continue the stored study in this process (``resume`` with one worker, ``worker``)."""
    from autotune import driver

    s = driver.resume_study(
        url,
        args.study,
        n_trials=args.n_trials,
        show_progress=not args.no_progress,
        cache_dir=args.cache_dir,
        limits=limits,
    )
    return _finish(s, url)
