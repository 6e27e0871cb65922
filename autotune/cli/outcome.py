"""The run limits a user types: ``--time-budget`` / ``--memory-limit`` ("30m", "20GiB"). How a run
ends (summary line, exit status) is autotune.session."""

from __future__ import annotations

import re
from typing import Any

from autotune.limits import RunLimits
from autotune.spec import SpecError, StudySpec

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
