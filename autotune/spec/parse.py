"""A spec from data or YAML text, validated (schema.py), any problem as one ``SpecError`` line
naming the field: the boundary every spec crosses (``load.load_spec`` reads the file first)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from autotune.errors import SpecError
from autotune.spec.schema import StudySpec

_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict"}


def _field_path(loc: tuple[int | str, ...]) -> str:
    # pydantic adds the union member it tried ("str", "list[str]", "function-after[...]") to the
    # location; a user wants the field's own path.
    parts = [str(p) for p in loc if str(p) not in _TYPE_TAGS and "[" not in str(p)]
    return ".".join(parts) or "spec"


def _format_error(err: ValidationError) -> str:
    errors = err.errors()
    first = errors[0]
    loc = _field_path(first["loc"])
    others = {_field_path(e["loc"]) for e in errors[1:]} - {loc}
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    elif first["type"] == "missing":
        msg = "required field is missing"
    msg = msg.removeprefix("Value error, ")
    more = len(others)
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{loc}: {msg}{tail}"


def parse_spec(data: Any, origin: str = "spec") -> StudySpec:
    if not isinstance(data, dict):
        raise SpecError(f"{origin}: the spec must be a YAML mapping, got {type(data).__name__}")
    try:
        return StudySpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(f"{origin}: {_format_error(err)}") from None


def parse_spec_yaml(text: str, origin: str = "spec") -> StudySpec:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{origin}:{where} is not valid YAML") from None
    return parse_spec(data, origin)
