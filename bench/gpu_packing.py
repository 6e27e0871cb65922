"""What packing several trials onto one GPU buys (issue 23), measured: K worker processes share
one GPU, each runs the same list of quickstart (MiniLM) trials, and trials/s is compared with one
process running them one at a time.

Each process loads the base model and runs one warm-up trial before a barrier, so the timed part is
trials alone, as in a long-lived worker or Ray actor that keeps its base model between trials.
Peak memory per process is CUDA's max_memory_allocated, so the sum says what K co-tenants took.
Writes bench/results/gpu_packing.json and prints one line per K:
    gpu_packing k=K trials=N wall_s=W trials_per_s=R gain=R/R1 peak_mb_max=P

Run on a GPU machine: python bench/gpu_packing.py [--k 1 2 4] [--trials 6]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RESULTS = REPO / "bench" / "results"
# The quickstart's own space, from small to large, so that co-tenants differ as in a real study.
CONFIGS = [
    {"rank": 8, "batch_size": 16, "learning_rate": 3e-3},
    {"rank": 32, "batch_size": 64, "learning_rate": 1e-3},
    {"rank": 4, "batch_size": 32, "learning_rate": 2e-3},
    {"rank": 16, "batch_size": 16, "learning_rate": 1e-3},
]


def _worker(k: int, n_trials: int, barrier: Any, out: Any) -> None:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import torch

    from autotune.spec import load_spec
    from autotune.trial import trial_config
    from autotune.worker.run_trial import run_trial

    spec = load_spec(REPO / "studies" / "quickstart.yaml")
    warm = run_trial(trial_config(spec, CONFIGS[0]), lambda _s, _v: False)
    assert warm.state.value == "complete", warm.error
    torch.cuda.reset_peak_memory_stats()
    barrier.wait()
    t0 = time.monotonic()
    states = []
    for i in range(n_trials):
        r = run_trial(trial_config(spec, CONFIGS[(k + i) % len(CONFIGS)]), lambda _s, _v: False)
        states.append(r.state.value)
    t1 = time.monotonic()
    out.put({"worker": k, "t0": t0, "t1": t1, "states": states, "peak_mb": torch.cuda.max_memory_allocated() / 2**20})


def measure(k: int, n_trials: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")  # CUDA cannot be forked
    barrier, out = ctx.Barrier(k), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(i, n_trials, barrier, out)) for i in range(k)]
    for p in procs:
        p.start()
    rows = [out.get(timeout=900) for _ in procs]
    for p in procs:
        p.join()
    wall = max(r["t1"] for r in rows) - min(r["t0"] for r in rows)
    done = sum(s == "complete" for r in rows for s in r["states"])
    return {"k": k, "trials": k * n_trials, "complete": done, "wall_s": wall, "trials_per_s": k * n_trials / wall,
            "peak_mb": [r["peak_mb"] for r in rows]}  # fmt: skip


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--trials", type=int, default=6, help="trials per process, after its warm-up")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_packing: no CUDA device")
    runs = [measure(k, a.trials) for k in a.k]
    base = runs[0]["trials_per_s"]
    for r in runs:
        r["gain"] = r["trials_per_s"] / base
    result = {"device": torch.cuda.get_device_name(0), "spec": "studies/quickstart.yaml", "configs": CONFIGS,
              "runs": runs}  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu_packing.json").write_text(json.dumps(result, indent=2) + "\n")
    for r in runs:
        print(f"gpu_packing k={r['k']} trials={r['trials']} complete={r['complete']} wall_s={r['wall_s']:.1f} "
              f"trials_per_s={r['trials_per_s']:.3f} gain={r['gain']:.2f} "
              f"peak_mb_max={max(r['peak_mb']):.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
