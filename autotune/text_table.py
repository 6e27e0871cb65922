"""A plain-text table: no dependency, so listing trials stays instant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e-2 and v != 0 else f"{v:.4f}".rstrip("0").rstrip(".")
    return str(v)


def render_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append(
            "  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        )
    if not rows:
        lines.append("(no trials)")
    return "\n".join(lines)


def _numeric(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False
