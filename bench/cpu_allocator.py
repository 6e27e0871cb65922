"""Does a trial's CPU peak memory belong to its config, and what does that cost in speed?

glibc's malloc grows its mmap threshold as large blocks are freed, so a trial's RSS depends on
what ran before it in the process (autotune/worker/memory.py, MMAP_THRESHOLD). This runs the same
sequence of real quickstart trials (MiniLM; rank/batch 16/16, 16/16, 4/64, 16/16) in a fresh
process per mmap threshold (``AUTOTUNE_MMAP_THRESHOLD``; 0 = glibc's dynamic default), in
alternating order, ``--repeats`` times, and prints per threshold: the spread of the 16/16 peak
(max / min over its runs: 1.00 = the config alone sets it), the 4/64 peak, and the train time
relative to glibc's default. Last line:

    default_spread=A fixed_spread=B fixed_time_ratio=C fixed_peak_ratio=D

Run on an idle machine (2 cores: nothing else running): python bench/cpu_allocator.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEQUENCE = [(16, 16), (16, 16), (4, 64), (16, 16)]

CHILD = """
import json, sys, warnings
warnings.filterwarnings("ignore")
from autotune.spec import load_spec
from autotune.trial import trial_config
from autotune.worker.run_trial import run_trial
spec = load_spec(sys.argv[1])
out = []
for r, b in json.loads(sys.argv[2]):
    c = trial_config(spec, {"rank": r, "batch_size": b, "learning_rate": 1e-3}, sys.argv[3] or None)
    res = run_trial(c, lambda s, v: False)
    out.append({"rank": r, "batch_size": b, "train_s": res.train_time_s, "peak_mb": res.peak_memory_mb})
print("RESULT " + json.dumps(out))
"""


def one(threshold: int, spec: str, cache: str) -> list[dict[str, float]]:
    env = dict(os.environ, AUTOTUNE_MMAP_THRESHOLD=str(threshold), PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, spec, json.dumps(SEQUENCE), cache],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return list(json.loads(line[len("RESULT ") :]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(REPO / "studies" / "quickstart.yaml"))
    ap.add_argument("--thresholds", type=int, nargs="+", default=[0, 65536])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cache-dir", default="")
    args = ap.parse_args()
    runs: dict[int, list[dict[str, float]]] = {t: [] for t in args.thresholds}
    for rep in range(args.repeats):
        order = args.thresholds if rep % 2 == 0 else list(reversed(args.thresholds))
        for t in order:
            rows = one(t, args.spec, args.cache_dir)
            runs[t] += rows
            cells = " | ".join(
                f"{int(r['rank'])}/{int(r['batch_size'])} {r['train_s']:.1f}s {r['peak_mb']:.0f}MB" for r in rows
            )
            print(f"threshold {t}: {cells}", flush=True)
    base = args.thresholds[0]
    summary = {}
    for t, rows in runs.items():
        small = [r["peak_mb"] for r in rows if r["batch_size"] == 16]
        large = [r["peak_mb"] for r in rows if r["batch_size"] == 64]
        summary[t] = {
            "spread": max(small) / min(small),
            "peak_16": statistics.median(small),
            "peak_64": statistics.median(large),
            "train_s": statistics.median(r["train_s"] for r in rows),
        }
        s = summary[t]
        print(
            f"threshold {t}: 16/16 peak median {s['peak_16']:.0f} MB, spread x{s['spread']:.2f}; "
            f"4/64 peak {s['peak_64']:.0f} MB; train median {s['train_s']:.1f} s"
        )
    fixed = args.thresholds[-1]
    print(
        f"default_spread={summary[base]['spread']:.2f} fixed_spread={summary[fixed]['spread']:.2f} "
        f"fixed_time_ratio={summary[fixed]['train_s'] / summary[base]['train_s']:.2f} "
        f"fixed_peak_ratio={summary[fixed]['peak_64'] / summary[base]['peak_64']:.2f}"
    )


if __name__ == "__main__":
    main()
