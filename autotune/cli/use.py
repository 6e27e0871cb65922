"""The commands that hand a result over: ``best --format peft|spec``, ``export --peft-config``
and ``train``. Torch-free at import, and no peft import here at all: ``export --peft-config``
calls the worker's ``state.save_lora_config`` from inside its own function, and ``train`` loads
the worker only once its inputs are checked."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from autotune.errors import StorageError
from autotune.spec import parse_spec_yaml
from autotune.storage.url import resolve_url


def add_train_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train the best (or top K) configurations at a longer budget and save a peft adapter",
        description="Train stored trial configurations with the same recipe at a longer budget, evaluate each "
        "on the validation split, and save the best as a peft adapter (adapter_config.json, "
        "adapter_model.safetensors, tokenizer, autotune_train.json). Fits run one after another in this "
        "process, on one device.",
    )
    p.add_argument("study", help="study name")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (must not exist, or be empty)")
    p.add_argument(
        "--storage",
        metavar="URL",
        default=None,
        help="database URL (default: $AUTOTUNE_STORAGE, else sqlite:///autotune.db)",
    )
    p.add_argument("--trial", type=int, default=None, metavar="N", help="train this trial (default: the best)")
    p.add_argument(
        "--top", type=int, default=1, metavar="K", help="train the K best trials and check their ranking (default: 1)"
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--train-examples", type=int, default=None, metavar="N", help="training examples per fit")
    budget.add_argument(
        "--epochs", type=float, default=None, metavar="E", help="passes over the training split (default: 1)"
    )
    p.add_argument(
        "--devices",
        default="auto",
        help="auto, cpu, or GPU ids like 0,1 (fits run one after another on the first listed GPU)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="also write DIR/merged: the base model with the adapter merged in (loads without peft)",
    )
    p.add_argument("--cache-dir", default=None, help="tokenized-data cache (default: ~/.cache/autotune)")


def _study_spec(store: Any, study: str) -> Any:
    row = store.require_study(study)
    return parse_spec_yaml(row.spec_yaml, f"stored spec of {study}")


def _trial(store: Any, study: str, number: int | None) -> dict[str, Any]:
    from autotune.storage.fits import trial_row

    if number is not None:
        return trial_row(store, study, number)
    row = store.best(study)
    if row is None:
        raise StorageError(f"study '{study}' has no complete trial yet")
    return dict(row)


def print_answer(args: argparse.Namespace) -> int:
    """``best --format peft`` (a Python snippet) or ``--format spec`` (a pinned spec YAML)."""
    from autotune.handoff.snippets import peft_snippet, pinned_spec_yaml
    from autotune.storage import Store

    store = Store.open(resolve_url(args.storage), create=False)
    try:
        spec = _study_spec(store, args.study)
        row = _trial(store, args.study, None)
    finally:
        store.close()
    text = peft_snippet(args.study, row, spec) if args.format == "peft" else pinned_spec_yaml(args.study, spec, row)
    print(text, end="")
    return 0


def export_peft_config(args: argparse.Namespace) -> int:
    """``export --peft-config DIR``: adapter_config.json through peft's own LoraConfig.save_pretrained."""
    from autotune.handoff.snippets import lora_kwargs
    from autotune.storage import Store

    store = Store.open(resolve_url(args.storage), create=False)
    try:
        spec = _study_spec(store, args.study)
        row = _trial(store, args.study, args.trial)
    finally:
        store.close()
    from autotune.worker.state import save_lora_config  # loads peft and torch: only this command pays

    out = Path(args.peft_config)
    try:
        save_lora_config(lora_kwargs(row, spec), str(out))
    except OSError as err:
        raise StorageError(f"--peft-config {out}: cannot write ({err.strerror})") from None
    print(f"wrote {out / 'adapter_config.json'} (trial {row['trial_number']})", file=sys.stderr)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    if args.devices == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch is imported
    elif args.devices != "auto":
        os.environ["CUDA_VISIBLE_DEVICES"] = args.devices
    from autotune.errors import FitError
    from autotune.handoff.train import TrainOptions, train

    opts = TrainOptions(
        trial=args.trial,
        top=args.top,
        train_examples=args.train_examples,
        epochs=args.epochs,
        cache_dir=args.cache_dir,
        merge=args.merge,
    )
    try:
        return train(resolve_url(args.storage), args.study, Path(args.out), opts)
    except FitError as err:
        print(f"autotune: error: {err}", file=sys.stderr)
        return err.code
