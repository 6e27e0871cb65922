"""What the CPU memory measurement costs the training it measures.

On CPU a trial's peak memory is its RSS above a baseline (autotune/worker/memory.py). For that
baseline to mean anything, ``MemoryMeter`` first gives the heap a previous trial freed back to
the OS (``malloc_trim``); otherwise the new trial reuses that memory and its growth hides inside
it. The pages given back are faulted in again by the next trial's first large batches. This
script runs the same MiniLM trial again and again in one process, interleaving trials that
start with the trim (as autotune does) and trials that start without it, and compares their
train time (set-up and evaluation excluded). Writes bench/results/trim_cost.json and ends with:

    train_time_ratio_trim_vs_notrim=R

Run: python bench/trim_cost.py [--pairs 4] [--batch-size 64] [--examples 768]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import warnings
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--examples", type=int, default=768)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    from autotune.spec import load_spec
    from autotune.trial import trial_config
    from autotune.worker import memory
    from autotune.worker.run_trial import run_trial

    trim = memory._malloc_trim
    spec = load_spec(Path(__file__).parents[1] / "studies" / "quickstart.yaml")
    params = {"rank": 8, "batch_size": args.batch_size, "learning_rate": 1e-3}
    times: dict[str, list[float]] = {"trim": [], "notrim": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = trial_config(
            spec.model_copy(update={"budget": spec.budget.model_copy(update={"train_examples": args.examples})}),
            params,
            tmp,
        )
        run_trial(config, lambda k, s: False)  # warm-up: model load, tokenization, first-touch of the heap
        for i in range(args.pairs):
            for mode in ("trim", "notrim") if i % 2 == 0 else ("notrim", "trim"):
                memory._malloc_trim = trim if mode == "trim" else (lambda: None)  # type: ignore[assignment]
                result = run_trial(config, lambda k, s: False)
                times[mode].append(result.train_time_s)
                print(f"pair {i + 1} {mode:6s} train {result.train_time_s:.2f} s")
        memory._malloc_trim = trim  # type: ignore[assignment]
    ratio = statistics.median(times["trim"]) / statistics.median(times["notrim"])
    RESULTS.mkdir(exist_ok=True)
    out = {"batch_size": args.batch_size, "examples": args.examples, "train_time_s": times, "ratio": ratio}
    (RESULTS / "trim_cost.json").write_text(json.dumps(out, indent=2))
    print(f"train_time_ratio_trim_vs_notrim={ratio:.3f}")


if __name__ == "__main__":
    main()
