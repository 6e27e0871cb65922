"""The run limits a user types: ``--time-budget`` / ``--memory-limit`` ("30m", "20GiB"): their
flags (``add_limit_args``, on `run`, `resume` and `worker`) and their parsing into
``autotune.study.limits.RunLimits``, checked once here."""

from __future__ import annotations

import argparse
import re
from typing import Any

from autotune.errors import SpecError
from autotune.spec import StudySpec
from autotune.study.limits import RunLimits

_UNITS_S: dict[str, float] = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}
_UNITS_MB: dict[str, float] = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024}


def _parse(text: str, units: dict[str, float], flag: str, example: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in units or float(m.group(1)) <= 0:
        raise SpecError(f"{flag}: expected a positive amount like {example}, got {text!r}")
    return float(m.group(1)) * units[unit]


def parse_duration_s(text: str) -> float:
    return _parse(text, _UNITS_S, "--time-budget", "30m, 2h or 90s")


def parse_memory_mb(text: str) -> float:
    return _parse(text, _UNITS_MB, "--memory-limit", "20GiB or 512MB")


def run_limits(args: Any) -> RunLimits:
    """``--time-budget`` / ``--memory-limit`` as typed, checked once here (one line on error)."""
    time_budget, memory_limit = getattr(args, "time_budget", None), getattr(args, "memory_limit", None)
    return RunLimits(
        study_time_s=parse_duration_s(time_budget) if time_budget else None,
        memory_limit_mb=parse_memory_mb(memory_limit) if memory_limit else None,
    )


def with_limits(spec: StudySpec, args: Any) -> StudySpec:
    return run_limits(args).apply(spec)


def add_limit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--memory-limit",
        default=None,
        metavar="SIZE",
        help="configs predicted above this peak memory (e.g. 20GiB) are not run (default: the spec's "
        "budget.memory_limit_mb, else the device's)",
    )
    p.add_argument(
        "--time-budget",
        default=None,
        metavar="DURATION",
        help="no trial starts whose predicted time would overrun this (e.g. 30m; default: budget.study_time_s)",
    )
