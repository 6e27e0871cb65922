"""What `memory.gradient_checkpointing: on` buys and costs: peak memory and train time of the same
trial with it off and on, side by side, A B A B (issue 22).

MiniLM (the quickstart's model and data) at batch 64, rank 16, and the smoke study's tiny llama
at batch 64; peak memory is the trial's own figure (CPU: malloc's bytes in use above the
baseline; CUDA: max_memory_allocated), train time excludes evaluation. Writes
bench/results/checkpointing.json (checkpointing_cuda.json on a GPU) and ends with one line per model:
    checkpointing model=M peak_mb_off=X peak_mb_on=Y peak_ratio=Y/X train_s_off=T train_s_on=U time_ratio=U/T

Run on an idle machine: python bench/checkpointing.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from autotune.spec import load_spec, parse_spec  # noqa: E402
from autotune.trial import trial_config  # noqa: E402

RESULTS = REPO / "bench" / "results"
PARAMS = {"rank": 16, "batch_size": 64, "learning_rate": 1e-3}


def _spec(path: str, mode: str, train_examples: int) -> Any:
    data = load_spec(REPO / path).model_dump(mode="json")
    data["memory"] = {"gradient_checkpointing": mode}
    data["budget"] = {**data["budget"], "train_examples": train_examples, "evals": 1, "max_eval_examples": 64}
    return parse_spec(data, "checkpointing bench")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    from autotune.study.driver import default_trial_fn

    run = default_trial_fn()
    out: dict[str, Any] = {"params": PARAMS, "repeats": args.repeats, "models": {}}
    for label, path, n in (("minilm", "studies/quickstart.yaml", 512), ("tiny-llama", "studies/smoke.yaml", 1024)):
        runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        # a warm-up trial, not counted: the first trial of a process pays CUDA's kernel loading and
        # cuBLAS set-up (a lent H200 timed "off" 8x slower than "on" without it)
        run(trial_config(_spec(path, "off", 64), PARAMS), lambda _k, _v: False, None)
        for _ in range(args.repeats):
            for mode in ("off", "on"):  # A B A B: drift on a shared machine hits both alike
                r = run(trial_config(_spec(path, mode, n), PARAMS), lambda _k, _v: False, None)
                assert r.state.value == "complete", r.error
                runs[mode].append({"peak_mb": float(r.peak_memory_mb or 0.0), "train_s": r.train_time_s,
                                   "val_loss": float(r.val_loss or 0.0)})  # fmt: skip
        med = {m: {k: statistics.median(x[k] for x in v) for k in v[0]} for m, v in runs.items()}
        out["models"][label] = {"runs": runs, "median": med, "train_examples": n,
                                "peak_ratio": med["on"]["peak_mb"] / med["off"]["peak_mb"],
                                "time_ratio": med["on"]["train_s"] / med["off"]["train_s"]}  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    import torch

    name = "checkpointing_cuda.json" if torch.cuda.is_available() else "checkpointing.json"  # one file per device kind
    (RESULTS / name).write_text(json.dumps(out, indent=2) + "\n")
    for label, m in out["models"].items():
        off, on = m["median"]["off"], m["median"]["on"]
        print(
            f"checkpointing model={label} peak_mb_off={off['peak_mb']:.1f} peak_mb_on={on['peak_mb']:.1f} "
            f"peak_ratio={m['peak_ratio']:.2f} train_s_off={off['train_s']:.2f} train_s_on={on['train_s']:.2f} "
            f"time_ratio={m['time_ratio']:.2f}"
        )


if __name__ == "__main__":
    main()
