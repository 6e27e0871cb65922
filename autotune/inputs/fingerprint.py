"""A fingerprint of a study's data files (size and sha256), stored with the study.

``resume`` and ``worker`` recompute it: different data under the same path is one clear line,
never a silent mix of trials trained on two datasets. Built-in data and hub datasets have no
local file to hash and no fingerprint.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from autotune.errors import SpecError
from autotune.spec import StudySpec

_CHUNK = 1 << 20


def _hash_file(path: Path, h: Any) -> int:
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size


def path_fingerprint(value: str) -> dict[str, Any] | None:
    """{"size": bytes, "sha256": hex} of a file, or of every file under a directory (by relative
    path, in sorted order); None for anything that is not a local path."""
    path = Path(value)
    if not path.exists():
        return None
    h = hashlib.sha256()
    size = 0
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(str(f.relative_to(path)).encode() + b"\0")
            size += _hash_file(f, h)
    else:
        size = _hash_file(path, h)
    return {"size": size, "sha256": h.hexdigest()}


def data_fingerprint(spec: StudySpec) -> dict[str, Any]:
    """One entry per local data path of the spec (source, validation file)."""
    out: dict[str, Any] = {}
    for field in ("source", "validation"):
        value = getattr(spec.data, field)
        if value is None or value.startswith("builtin:"):
            continue
        fp = path_fingerprint(value)
        if fp is not None:
            out[f"data.{field}"] = {"path": value, **fp}
    return out


def check_fingerprint(stored: dict[str, Any] | None, current: dict[str, Any], study: str) -> None:
    """SpecError when a stored data file now has other contents (or is gone)."""
    if not stored:
        return
    for field, old in stored.items():
        new = current.get(field)
        if new is None:
            raise SpecError(f"{field}: {old['path']} is gone or unreadable since study '{study}' started")
        if new["sha256"] != old["sha256"]:
            raise SpecError(
                f"{field}: {old['path']} has changed since study '{study}' started "
                f"({old['size']} bytes, sha256 {old['sha256'][:12]} then; {new['size']} bytes, "
                f"sha256 {new['sha256'][:12]} now): restore it, or start a new study with --study-name"
            )
