"""`autotune init`: a first spec drafted from a data file and a model, from what can be read without
training. Pure and torch-free: the columns and task from the rows (and the model's config), the
max length from measured token lengths, the budget from the training split, and the search space
from the LoRA defaults the docs justify. The CLI (cli/init.py) measures the lengths with the
model's tokenizer, writes the YAML, validates it and prints the estimate.

When a choice cannot be made from the data, ``DataError`` names the candidates and the flag that
settles it, in one line."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.errors import DataError
from autotune.inputs.examples import Record, read_rows

# Column names by role, most specific first (the names common datasets use).
TEXT_NAMES = ("text", "sentence", "content", "document", "review", "body", "question", "input")
PROMPT_NAMES = ("prompt", "instruction", "question", "input", "source")
COMPLETION_NAMES = ("completion", "response", "output", "answer", "target")
LABEL_NAMES = ("label", "labels", "category", "class", "sentiment", "intent", "topic")
MAX_LABELS = 100  # a column with more distinct values than this is text, not classes


@dataclass(frozen=True)
class Columns:
    task: str  # causal-lm | seq-cls
    text_field: str | None
    prompt_field: str | None
    completion_field: str | None
    label_field: str | None
    n_labels: int


def read_sample(path: str) -> list[Record]:
    """Every row of the file (DataError, one line, when it cannot be read or is empty)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"--data: {path}: no such file")
    rows = read_rows(path)
    if not rows:
        raise DataError(f"--data: {path}: no examples in it")
    return rows


def _strings(rows: list[Record], col: str) -> bool:
    return all(isinstance(r.get(col), str) for r in rows[:200])


def _pick(names: tuple[str, ...], cols: list[str], rows: list[Record]) -> str | None:
    lower = {c.lower(): c for c in cols}
    return next((lower[n] for n in names if n in lower and _strings(rows, lower[n])), None)


def choose_columns(
    rows: list[Record],
    task: str | None,
    model_is_decoder: bool | None,
    *,
    text_field: str | None = None,
    label_field: str | None = None,
    prompt_field: str | None = None,
    completion_field: str | None = None,
) -> Columns:
    """The task and columns: flags first, then names, then content (a label column has few
    distinct values; the text column is the longest string column)."""
    cols = list(rows[0])
    for flag, col in (("--text-field", text_field), ("--label-field", label_field), ("--prompt-field", prompt_field),
                      ("--completion-field", completion_field)):  # fmt: skip
        if col is not None and col not in cols:
            raise DataError(f"{flag} {col}: no such column (the data has: {', '.join(cols)})")
    prompt = prompt_field or _pick(PROMPT_NAMES, cols, rows)
    completion = completion_field or _pick(COMPLETION_NAMES, cols, rows)
    label = label_field or _label_column(rows, cols)
    if task is None:
        if prompt and completion and prompt != completion:
            task = "causal-lm"
        elif label is not None and model_is_decoder is not True:
            task = "seq-cls"
        elif label is None and len([c for c in cols if _strings(rows, c)]) >= 1 and model_is_decoder is not False:
            task = "causal-lm"
        else:
            what = "a label column" if label else "no label column"
            raise DataError(
                f"cannot tell the task: the data has {what} ({', '.join(cols)}) and the model is "
                f"{'a decoder' if model_is_decoder else 'an encoder'}; pass --task causal-lm or --task seq-cls"
            )
    if task == "causal-lm" and prompt and completion and prompt != completion:
        return Columns("causal-lm", None, prompt, completion, None, 0)
    if task == "seq-cls" and label is None:
        raise DataError(f"--task seq-cls: no label column among {', '.join(cols)}; pass --label-field NAME")
    text = text_field or _text_column(rows, [c for c in cols if c != label])
    if task == "seq-cls":
        assert label is not None
        n = len({str(r.get(label)) for r in rows})
        return Columns("seq-cls", text, None, None, label, n)
    return Columns("causal-lm", text, None, None, None, 0)


def _label_column(rows: list[Record], cols: list[str]) -> str | None:
    by_name = [c for c in cols if c.lower() in LABEL_NAMES]
    if by_name:
        return by_name[0]
    cap = min(MAX_LABELS, max(2, len(rows) // 4))  # classes repeat: far fewer values than rows
    few = [c for c in cols if 1 < len({str(r.get(c)) for r in rows}) <= cap]
    return few[0] if len(few) == 1 else None


def _text_column(rows: list[Record], cols: list[str]) -> str:
    named = _pick(TEXT_NAMES, cols, rows)
    if named is not None:
        return named
    strings = [c for c in cols if _strings(rows, c)]
    if len(strings) == 1:
        return strings[0]
    if not strings:
        raise DataError(f"no text column: none of {', '.join(cols)} holds strings; pass --text-field NAME")
    mean = {c: sum(len(str(r[c])) for r in rows) / len(rows) for c in strings}
    ranked = sorted(strings, key=lambda c: -mean[c])
    if mean[ranked[1]] > 0.5 * mean[ranked[0]]:  # two columns of similar length: ambiguous
        raise DataError(f"cannot tell the text column: candidates {', '.join(ranked)}; pass --text-field NAME")
    return ranked[0]


def max_length(lengths: list[int], position_limit: int | None) -> int:
    """About the 95th percentile of the token lengths, up to a multiple of 8, within the model's
    position limit (at least 16): the few longer examples are truncated rather than every batch
    padded to them."""
    ordered = sorted(lengths)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    n = max(16, -(-p95 // 8) * 8)
    return min(n, position_limit) if position_limit else n


def draft_spec(
    name: str,
    model: str,
    data: str,
    cols: Columns,
    max_len: int,
    n_examples: int,
    batch_sizes: list[int],
    tiny: bool,
) -> str:
    """The spec as commented YAML (every value says why)."""
    n_train = max(1, round(n_examples * 0.9))
    trial = min(1024, n_train)
    if tiny:  # a randomly initialised model learns at larger steps than a pretrained one (studies/smoke.yaml)
        lr_low, lr_high, lr_why = 1.0e-3, 3.0e-2, "a randomly initialised tiny model needs larger steps"
    else:
        lr_low, lr_high = 1.0e-4, 3.0e-3
        lr_why = "LoRA trains at about 10x full fine-tuning's 1e-5..1e-4 (Hu et al. 2021, appendix D)"
    fields: list[tuple[str, Any]] = [
        ("text_field", cols.text_field),
        ("prompt_field", cols.prompt_field),
        ("completion_field", cols.completion_field),
        ("label_field", cols.label_field),
    ]
    why_task = "prompt/completion columns" if cols.prompt_field else "a label column" if cols.label_field else "text"
    batches = ", ".join(str(b) for b in batch_sizes)
    data_lines = "".join(f"  {k}: {v}\n" for k, v in fields if v is not None)
    model_block = (
        "  name: tiny\n  tiny: {hidden_size: 64, num_layers: 2, num_heads: 4, intermediate_size: 128}\n"
        if tiny
        else f"  name: {model}\n"
    )
    return f"""# Written by `autotune init` from {Path(data).name} ({n_examples} examples) and {model}.
# Every value below is a starting point with its reason; edit freely, then `autotune validate`.
name: {name}
task: {cols.task}   # {why_task}
model:
{model_block}data:
  source: {data}
{data_lines}  max_length: {max_len}   # ~ the 95th percentile of the examples' token lengths (longer: truncated)
  validation_fraction: 0.1
lora:
  target_modules: auto   # the attention projections of this architecture (docs/search.md)
search:
  rank: {{choices: [4, 8, 16, 32]}}   # small ranks suffice for most tasks (Hu et al. 2021, table 6); 32 to check
  batch_size: {{choices: [{batches}]}}   # the sizes predicted to fit this machine's memory
  learning_rate: {{low: {lr_low:.1e}, high: {lr_high:.1e}, log: true}}   # {lr_why}
budget:
  train_examples: {trial}   # a short trial: every config sees the same examples, whatever its batch
  evals: 4
  target_examples: {n_train}   # one pass over the training split: what the final adapter trains on
objective: {{val_weight: 1.0, train_weight: 0.1}}
sampler: tpe
pruner: asha
precision: auto   # bf16 on a GPU that has it, fp32 on a CPU
seed: 0
n_trials: 8
"""
