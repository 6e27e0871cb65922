"""How a run ends on the command line: the summary line (quoted so it can be pasted into any
shell, whatever the study name), why the run stopped early, and the exit status. Also the
``--time-budget`` / ``--memory-limit`` values a user types ("30m", "20GiB")."""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

from autotune.spec import SpecError
from autotune.storage.url import redact

EXIT_SPEC_ERROR = 2
_UNITS_S: dict[str, float] = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}
_UNITS_MB: dict[str, float] = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024}


def best_hint(name: str, url: str) -> str:
    return f"see `autotune best {shlex.quote(name)} --storage {shlex.quote(redact(url))}`"


def summary_line(s: Any, url: str) -> str:
    best = "-" if s.best_score is None else f"{s.best_score:.4f}"
    state = "interrupted" if s.interrupted else "stopped" if s.stop_reason else "done"
    return (
        f"study '{s.study_name}': {s.finished}/{s.total} trials finished ({state}), best score {best}; "
        f"{best_hint(s.study_name, url)}"
    )


def finish_run(s: Any, url: str) -> int:
    """Print how the run ended; a property of the spec is the one-line user error (exit 2)."""
    if s.exit_code == EXIT_SPEC_ERROR and s.stop_reason:
        raise SpecError(s.stop_reason)
    print(summary_line(s, url), file=sys.stderr)
    if s.stop_reason:
        print(f"autotune: {s.stop_reason}", file=sys.stderr)
    if s.interrupted:
        return 130
    return int(s.exit_code)


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


def with_limits(spec: Any, args: Any) -> Any:
    """``run --time-budget`` / ``--memory-limit`` override the spec's budget (they are limits of
    this run, not part of the study's identity: see driver._spec_core)."""
    update = {}
    if getattr(args, "time_budget", None):
        update["study_time_s"] = parse_duration_s(args.time_budget)
    if getattr(args, "memory_limit", None):
        update["memory_limit_mb"] = parse_memory_mb(args.memory_limit)
    if not update:
        return spec
    return spec.model_copy(update={"budget": spec.budget.model_copy(update=update)})
