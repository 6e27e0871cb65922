"""autotune against transformers' own search, ``Trainer.hyperparameter_search`` (Optuna backend),
on the quickstart: the same split, search space, 8 trials, short budget and pruner (issue 20:
"we keep this check").

- HF: MiniLM + peft LoRA on the quickstart's tokenized training split (autotune's own data, so the
  split and the tokens are the same), ``model_init`` adding the trial's rank; TPE (Optuna's
  default sampler) with ASHA (``SuccessiveHalvingPruner``, autotune's default pruner); each trial
  sees 1,024 examples (``max_steps`` = 1024 / batch) and is evaluated 4 times on the validation
  split (eval loss, which HF reports to the pruner); the best trial is the lowest eval loss.
- autotune: ``autotune run studies/quickstart.yaml`` from the command line, as a user runs it,
  with ``--confirm-top 0`` (the same 8 short trials) and with its default (the 8 trials, then its
  2 best re-trained at the target budget).

Both from a fresh process, cold caches and a fresh database, timed end to end. Reported: wall time,
and the best trial's validation loss and accuracy (for autotune's default, the recommendation's
target-budget run). Writes bench/results/hf_search.json and ends with
``hf_search wall_s hf=X autotune=Y (confirm0 Z) ratio=R``.

Run on an idle machine: python bench/hf_search.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SPEC = "studies/quickstart.yaml"


def hf(out_dir: str) -> dict[str, Any]:
    """The HF search, in this (child) process: returns its wall time and best trial."""
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    import datasets
    import numpy as np
    import optuna
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    from autotune.spec import load_spec
    from autotune.trial import trial_config
    from autotune.worker import state
    from autotune.worker.models import load_pretrained, resolve_target_modules
    from autotune.worker.precision import pick_device

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec = load_spec(str(REPO / SPEC))
    s = spec.search
    assert s.rank.choices and s.batch_size.choices and s.learning_rate.low and s.learning_rate.high
    c0 = trial_config(spec, {"rank": 8, "batch_size": 16, "learning_rate": 1e-3}, None)
    entry = state.prepare_data(c0)  # autotune's own split and tokens
    device = pick_device()

    def to_dataset(split: Any) -> Any:
        cols: dict[str, list[Any]] = {"input_ids": [], "attention_mask": [], "labels": []}
        for i in range(len(split)):
            n = int(split.lengths[i])
            cols["input_ids"].append(split.input_ids[i, :n].tolist())
            cols["attention_mask"].append([1] * n)
            cols["labels"].append(int(split.labels[i]))
        return datasets.Dataset.from_dict(cols)

    train, val = to_dataset(entry.data.train), to_dataset(entry.data.validation)
    tok = entry.tokenizer

    def hp_space(trial: optuna.Trial) -> dict[str, Any]:
        rank = trial.suggest_categorical("rank", [int(v) for v in s.rank.choices or []])
        batch = trial.suggest_categorical("per_device_train_batch_size", [int(v) for v in s.batch_size.choices or []])
        lr = trial.suggest_float("learning_rate", float(s.learning_rate.low or 0), float(s.learning_rate.high or 0),
                                 log=True)  # fmt: skip
        steps = math.ceil(spec.budget.train_examples / batch)
        every = max(1, steps // spec.budget.evals)
        return {"rank": rank, "per_device_train_batch_size": batch, "learning_rate": lr, "max_steps": steps,
                "eval_steps": every, "logging_steps": every}  # fmt: skip

    def model_init(trial: Any) -> Any:
        # HF may build the model before it applies hp_space; suggesting again returns the trial's value
        rank = int(hp_space(trial)["rank"]) if trial is not None else 8
        n_labels = len(entry.data.labels or [])
        m = load_pretrained(c0.model.name, "seq-cls", n_labels, c0.model.revision, torch.float32, spec.seed)
        alpha: Any = rank * spec.lora.alpha_ratio  # as autotune's trials (peft types it int, takes a float)
        lcfg = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=spec.lora.dropout,
                          target_modules=resolve_target_modules(m, "attention"), task_type="SEQ_CLS")  # fmt: skip
        return get_peft_model(m, lcfg)

    def accuracy(p: Any) -> dict[str, float]:
        return {"accuracy": float((np.argmax(p.predictions, -1) == p.label_ids).mean())}

    args = TrainingArguments(
        output_dir=out_dir, eval_strategy="steps", eval_steps=64, logging_strategy="steps", save_strategy="no",
        report_to=[], disable_tqdm=True, seed=spec.seed, use_cpu=device.type == "cpu", lr_scheduler_type="constant",
        warmup_steps=0, remove_unused_columns=False, per_device_eval_batch_size=64,
    )  # fmt: skip
    trainer = Trainer(model_init=model_init, args=args, train_dataset=train, eval_dataset=val,
                      data_collator=DataCollatorWithPadding(tok), compute_metrics=accuracy)  # fmt: skip
    seen: list[dict[str, Any]] = []

    def objective(metrics: dict[str, float]) -> float:  # HF's default (eval loss); the metrics kept
        seen.append(dict(metrics))
        return float(metrics["eval_loss"])

    best = trainer.hyperparameter_search(
        hp_space=hp_space, n_trials=spec.n_trials, direction="minimize", backend="optuna",
        compute_objective=objective,
        sampler=optuna.samplers.TPESampler(seed=spec.seed), pruner=optuna.pruners.SuccessiveHalvingPruner(),
    )  # fmt: skip
    wall = time.perf_counter() - t0
    assert not isinstance(best, list)  # one objective
    final = min(seen, key=lambda m: m["eval_loss"])  # the lowest eval loss reported, with its accuracy
    return {"wall_s": wall, "best_params": best.hyperparameters, "best_eval_loss": best.objective,
            "best_accuracy": final.get("eval_accuracy")}  # fmt: skip


def autotune(confirm_top: int | None) -> dict[str, Any]:
    extra = [] if confirm_top is None else ["--confirm-top", str(confirm_top)]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "bench" / "quickstart_time.py"), *extra], check=True, cwd=REPO,
                   capture_output=True)  # fmt: skip
    name = "quickstart_time.json" if confirm_top is None else f"quickstart_time_confirm{confirm_top}.json"
    res = json.loads((RESULTS / name).read_text())
    rec = res["recommended"]
    return {"wall_s": res["wall_s"], "bench_s": time.perf_counter() - t0, "best_params": rec["params"],
            "best_val_loss": rec.get("val_loss"), "best_accuracy": rec.get("confirmed_accuracy") or rec.get("accuracy"),
            "confirmed": rec.get("confirmed_score") is not None}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # the HF side, in a fresh process as autotune's is
        Path(a.child).write_text(json.dumps(hf(str(Path(a.child).parent / "trainer"))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, AUTOTUNE_CACHE_DIR=f"{tmp}/cache")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--child", f"{tmp}/hf.json"], check=True, env=env)
        hf_res = json.loads(Path(f"{tmp}/hf.json").read_text())
        hf_res["process_wall_s"] = time.perf_counter() - t0
    ours0 = autotune(0)
    ours = autotune(None)
    out = {"spec": SPEC, "hf": hf_res, "autotune_confirm0": ours0, "autotune": ours,
           "ratio_autotune_confirm0_to_hf": ours0["wall_s"] / hf_res["process_wall_s"],
           "ratio_autotune_to_hf": ours["wall_s"] / hf_res["process_wall_s"]}  # fmt: skip
    (RESULTS / "hf_search.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"hf_search wall_s hf={hf_res['process_wall_s']:.1f} autotune={ours['wall_s']:.1f} "
          f"(confirm0 {ours0['wall_s']:.1f}) ratio={out['ratio_autotune_to_hf']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
