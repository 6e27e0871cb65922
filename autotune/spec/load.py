"""Loading a spec file: read it, validate it (``parse_spec_yaml``), then resolve its paths.

Relative paths in a spec resolve against the spec file's directory, not the current one.

``load_spec`` calls this once, so the spec stored with a study names absolute paths: ``autotune
resume`` from another directory, or a worker started elsewhere, reads the same files. Names that
are not paths (``builtin:NAME``, a hub id such as ``org/model``, a split name such as
``validation``, a packaged model) are left as they are.
"""

from __future__ import annotations

from pathlib import Path

from autotune.errors import SpecError
from autotune.spec.parse import parse_spec_yaml
from autotune.spec.schema import StudySpec

_FILE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv", ".tsv", ".txt", ".text", ".md")


def _looks_like_path(value: str) -> bool:
    return (
        value.startswith(("./", "../", ".\\", "..\\")) or value in (".", "..") or value.lower().endswith(_FILE_SUFFIXES)
    )


def resolve_path(value: str | None, base: Path) -> str | None:
    """``value`` joined to ``base`` when it names a relative path: one that exists under ``base``,
    or one that is written as a path (``./x``, ``data.csv``). Anything else is returned as is."""
    if value is None or value.startswith("builtin:") or value == "tiny":
        return value
    expanded = Path(value).expanduser()
    if expanded.is_absolute():
        return str(expanded) if value.startswith("~") else value
    candidate = base / value
    if candidate.exists() or _looks_like_path(value):
        return str(candidate.resolve())
    return value


def resolve_relative(spec: StudySpec, base: Path) -> StudySpec:
    from autotune.spec.packaged import PACKAGED

    data = spec.data.model_copy(
        update={"source": resolve_path(spec.data.source, base), "validation": resolve_path(spec.data.validation, base)}
    )
    model = spec.model
    if model.name not in PACKAGED:
        model = model.model_copy(update={"name": resolve_path(model.name, base)})
    return spec.model_copy(update={"data": data, "model": model})


def load_spec(path: str | Path) -> StudySpec:
    """The spec in the YAML file at ``path``, its relative paths resolved; one SpecError line for
    a missing file, bad YAML or a bad field."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{p}: no such spec file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{p}: cannot read spec ({err.__class__.__name__})") from None
    return resolve_relative(parse_spec_yaml(text, str(p)), p.resolve().parent)
