"""Raw examples: built-in datasets and user files, loaded and checked without torch.

The CLI calls ``load_examples`` before any trial starts, so a bad path, a missing column or an
empty split is one clear line (``DataError``) rather than a failed trial.
"""

from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import DataError

if TYPE_CHECKING:
    from autotune.spec import DataSpec

Record = dict[str, Any]


@dataclass(frozen=True)
class Examples:
    train: list[Record]
    validation: list[Record]
    labels: tuple[str, ...] | None  # seq-cls: label names, index = class id


# ---------------------------------------------------------------- built-in data (no download)

_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")
_ANIMALS = ("cat", "dog", "fox", "owl", "bee", "cow", "hen", "elk")
_COLOURS = ("red", "blue", "green", "black", "white", "brown")
_PLACES = ("garden", "kitchen", "forest", "river", "market", "station")


def _smoke_lm(n: int, seed: int) -> list[Record]:
    """Short sentences with structure a tiny LM can learn in seconds: counting runs, and
    templates whose second half repeats the first."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            start = rng.randrange(0, 40)
            length = rng.randrange(4, 9)
            nums = " ".join(str(start + k) for k in range(length))
            text = f"count from {start} : {nums}"
        elif kind == 1:
            name, animal, colour = rng.choice(_NAMES), rng.choice(_ANIMALS), rng.choice(_COLOURS)
            text = f"{name} saw a {colour} {animal} and the {animal} was {colour}"
        else:
            name, place = rng.choice(_NAMES), rng.choice(_PLACES)
            text = f"{name} went to the {place} and {name} came back from the {place}"
        out.append({"text": text})
    return out


_TOPICS: dict[str, tuple[str, ...]] = {
    "sport": ("match", "goal", "team", "coach", "score", "league", "player", "race"),
    "food": ("soup", "bread", "cheese", "spice", "recipe", "oven", "salad", "fruit"),
    "tech": ("server", "code", "laptop", "network", "chip", "software", "cloud", "robot"),
    "weather": ("rain", "storm", "sunny", "wind", "snow", "cloudy", "forecast", "heat"),
}
_FILLER = ("the", "a", "today", "really", "was", "about", "new", "big", "very", "some", "and", "with")


def _smoke_cls(n: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    topics = sorted(_TOPICS)
    out = []
    for i in range(n):
        label = topics[i % len(topics)]
        words = [rng.choice(_TOPICS[label]) for _ in range(2)] + [rng.choice(_FILLER) for _ in range(5)]
        rng.shuffle(words)
        out.append({"text": " ".join(words), "label": label})
    return out


def builtin(name: str, seed: int) -> list[Record]:
    """The rows of the built-in data set ``builtin:NAME`` (made in code, deterministic)."""
    if name == "smoke":
        return _smoke_lm(2000, seed=1234)
    if name == "smoke-cls":
        return _smoke_cls(2000, seed=1234)
    if name == "stdlib-docstrings":
        from autotune.inputs.stdlib_docstrings import stdlib_docstrings

        return stdlib_docstrings()
    raise DataError(f"data.source: unknown built-in dataset '{name}' (known: {', '.join(BUILTINS)})")


BUILTINS = ("smoke", "smoke-cls", "stdlib-docstrings")


# ---------------------------------------------------------------- files


_FILE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv", ".tsv", ".txt", ".text", ".md")


def _detect_format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    if path.is_dir():
        return "hf"
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".txt", ".text", ".md"):
        return "text"
    raise DataError(f"{path}: cannot tell the format from the name; set data.format to jsonl, csv or text")


def _csv_dialect(path: Path, sample: str, delimiter: str | None) -> type[csv.Dialect] | csv.Dialect | str:
    """The CSV dialect: the delimiter given in the spec, else sniffed from the file's start (a
    spreadsheet in a comma-decimal locale saves ';'), else the suffix's default."""
    default = "excel-tab" if path.suffix.lower() == ".tsv" else "excel"
    if delimiter is not None:

        class Given(csv.excel):
            pass

        Given.delimiter = delimiter
        return Given
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return default

    # Only the delimiter is taken from the sniffer: its guess of the quoting from a sample cut
    # mid-field misreads files that quote fields holding the delimiter (as csv.DictWriter and
    # spreadsheets write them), splitting such a field into an extra, nameless column.
    class Sniffed(csv.excel):
        pass

    Sniffed.delimiter = sniffed.delimiter
    return Sniffed


def _read_file(path: Path, fmt: str, delimiter: str | None = None) -> list[Record]:
    # utf-8-sig: a file saved by a spreadsheet starts with a byte order mark, which would otherwise
    # become part of the first column's name ("\ufefftext").
    try:
        if fmt == "jsonl":
            text = path.read_text(encoding="utf-8-sig")
            if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
                rows = json.loads(text)
            else:
                rows = []
                for lineno, line in enumerate(text.splitlines(), start=1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except json.JSONDecodeError:
                            raise DataError(f"{path}: invalid JSON on line {lineno}") from None
            if not all(isinstance(r, dict) for r in rows):
                raise DataError(f"{path}: every JSON line must be an object")
            return rows
        if fmt == "csv":
            with path.open(newline="", encoding="utf-8-sig") as fh:
                text = fh.read()
            dialect = _csv_dialect(path, text[: 64 * 1024], delimiter)
            return [dict(r) for r in csv.DictReader(io.StringIO(text, newline=""), dialect=dialect)]
        if fmt == "text":
            # One example per blank-line-separated paragraph; a file with no blank lines gives
            # one example per line.
            text = path.read_text(encoding="utf-8-sig")
            paras = [p.strip() for p in text.split("\n\n") if p.strip()]
            if len(paras) <= 1:
                paras = [ln.strip() for ln in text.splitlines() if ln.strip()]
            return [{"text": p} for p in paras]
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: invalid JSON on line {err.lineno}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None
    raise DataError(f"data.format: unknown format '{fmt}'")


def _read_hf(source: str, split: str) -> list[Record]:
    try:
        import datasets  # optional: only for users online or with a saved dataset directory
    except ImportError:
        raise DataError(
            f"{source}: a Hugging Face dataset needs the 'datasets' package (pip install datasets)"
        ) from None
    try:
        if Path(source).is_dir():
            loaded = datasets.load_from_disk(source)
            ds = loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        else:
            ds = datasets.load_dataset(source, split=split)
    except Exception as err:  # the datasets library raises many types; all are one user line
        raise DataError(f"{source}: cannot load split '{split}' ({err.__class__.__name__}: {str(err)[:120]})") from None
    return [dict(r) for r in ds]


def _read_source(source: str, fmt: str, split: str = "train", delimiter: str | None = None) -> list[Record]:
    path = Path(source)
    looks_like_hub_name = (
        "/" in source and not source.startswith((".", "/", "~")) and path.suffix.lower() not in _FILE_SUFFIXES
    )
    if fmt == "hf" or (fmt == "auto" and not path.exists() and looks_like_hub_name):
        return _read_hf(source, split)
    if not path.exists():
        raise DataError(f"data.source: {source}: no such file or directory")
    real = _detect_format(path, fmt)
    if real == "hf":
        return _read_hf(source, split)
    return _read_file(path, real, delimiter)


# ---------------------------------------------------------------- checks and splits


def read_rows(path: str) -> list[Record]:
    """Every row of a data file (format from its name or content), as `autotune init` reads it."""
    return _read_source(path, "auto")


def _check_fields(rows: list[Record], fields: list[str], where: str) -> None:
    if not rows:
        raise DataError(f"{where}: no examples")
    missing = [f for f in fields if f not in rows[0]]
    if missing:
        have = ", ".join(sorted(rows[0])[:8])
        raise DataError(f"{where}: missing column '{missing[0]}' (columns: {have})")
    for i, r in enumerate(rows):
        for f in fields:
            v = r.get(f)
            if v is None or (isinstance(v, str) and not v.strip() and f != "completion"):
                raise DataError(f"{where}: row {i + 1} has an empty '{f}'")


def load_data(task: str, data: DataSpec, seed: int) -> Examples:
    """The examples a spec's data section names: the one place that unpacks it for loading."""
    return load_examples(
        task=task,
        source=data.source,
        fmt=data.format,
        text_field=data.text_field,
        text_pair_field=data.text_pair_field,
        prompt_field=data.prompt_field,
        completion_field=data.completion_field,
        label_field=data.label_field,
        validation=data.validation,
        validation_fraction=data.validation_fraction,
        max_examples=data.max_examples,
        seed=seed,
        delimiter=data.delimiter,
    )


def load_examples(
    *,
    task: str,
    source: str,
    fmt: str,
    text_field: str,
    text_pair_field: str | None,
    prompt_field: str | None,
    completion_field: str | None,
    label_field: str,
    validation: str | None,
    validation_fraction: float,
    max_examples: int | None,
    seed: int,
    delimiter: str | None = None,
) -> Examples:
    """Load, check and split the examples; raises DataError with one line on bad input."""
    if source.startswith("builtin:"):
        rows = builtin(source.removeprefix("builtin:"), seed)
    else:
        rows = _read_source(source, fmt, delimiter=delimiter)
    val_rows: list[Record] | None = None
    if validation is not None:
        vpath = Path(validation)
        if vpath.exists() and vpath.is_file():
            val_rows = _read_file(vpath, _detect_format(vpath, "auto" if fmt == "hf" else fmt), delimiter)
        elif Path(source).is_dir() or fmt == "hf" or not Path(source).exists():
            val_rows = _read_source(source, "hf", split=validation)
        else:
            raise DataError(f"data.validation: {validation}: no such file")

    if task == "causal-lm":
        fields = [prompt_field, completion_field] if prompt_field and completion_field else [text_field]
    else:
        fields = [text_field, label_field] + ([text_pair_field] if text_pair_field else [])
    fields = [f for f in fields if f is not None]
    _check_fields(rows, fields, f"data.source {source}")

    if val_rows is None:
        order = list(range(len(rows)))
        random.Random(seed).shuffle(order)
        n_val = max(1, round(len(rows) * validation_fraction))
        if n_val >= len(rows):
            raise DataError(f"data.source {source}: {len(rows)} example(s) is too few to hold out a validation split")
        val_rows = [rows[i] for i in order[:n_val]]
        rows = [rows[i] for i in order[n_val:]]
    else:
        _check_fields(val_rows, fields, f"data.validation {validation}")
    if max_examples is not None:
        rows = rows[:max_examples]

    labels: tuple[str, ...] | None = None
    if task == "seq-cls":
        names = sorted({str(r[label_field]) for r in rows})
        if len(names) < 2:
            raise DataError(
                f"data.source {source}: column '{label_field}' has {len(names)} distinct label(s); need 2 or more"
            )
        labels = tuple(names)
        unknown = sorted({str(r[label_field]) for r in val_rows} - set(names))
        if unknown:
            raise DataError(f"data.validation: label '{unknown[0]}' does not occur in the training data")
    return Examples(train=rows, validation=val_rows, labels=labels)
