"""Before and after the CPU probe skip (study/gate.make_gate, 2026-12-06), side by side: the
quickstart's time outside training and evaluation (bench/overhead.py) with the default (a CPU
study with no limit runs one mini-trial of its largest config, then no probe) and with the probe
asked for (``--probe``: budget.memory_limit_mb 1e6 MB, which the probe's check cannot hit, so the
trials and their scores are the same). Alternated A B A B, since this VM's speed drifts between
runs. Writes bench/results/probe_skip.json and ends with:

    probe_skip overhead_s default=X probe=Y paired_ratio=R

Run on an idle machine: python bench/probe_skip.py [--rounds 2] [--confirm-top 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--confirm-top", type=int, default=None, help="passed to overhead.py")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"default": [], "probe": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for arm in ("default", "probe"):
                out = f"{tmp}/{arm}{k}.json"
                cmd = [sys.executable, str(Path(__file__).parent / "overhead.py"), "--out", out]
                cmd += ["--probe"] if arm == "probe" else []
                cmd += [] if args.confirm_top is None else ["--confirm-top", str(args.confirm_top)]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                r = json.loads(Path(out).read_text())
                runs[arm].append({key: r[key] for key in ("run_wall_s", "overhead_s", "overhead_share", "best_score")})
                print(arm, k, runs[arm][-1], file=sys.stderr, flush=True)
    pairs = [d["overhead_s"] / p["overhead_s"] for d, p in zip(runs["default"], runs["probe"], strict=True)]
    wall = [d["run_wall_s"] / p["run_wall_s"] for d, p in zip(runs["default"], runs["probe"], strict=True)]
    medians = {arm: statistics.median(r["overhead_s"] for r in rs) for arm, rs in runs.items()}
    summary = {
        "command": " ".join(["python bench/probe_skip.py", *sys.argv[1:]]),
        "spec": "studies/quickstart.yaml",
        "runs": runs,
        "median_overhead_s": medians,
        "median_overhead_share": {arm: statistics.median(r["overhead_share"] for r in rs) for arm, rs in runs.items()},
        "paired_overhead_ratio": statistics.median(pairs),
        "paired_wall_ratio": statistics.median(wall),
    }
    RESULTS.mkdir(exist_ok=True)
    name = "probe_skip.json" if args.confirm_top is None else f"probe_skip_confirm{args.confirm_top}.json"
    (RESULTS / name).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"probe_skip overhead_s default={medians['default']:.1f} probe={medians['probe']:.1f} "
          f"paired_ratio={summary['paired_overhead_ratio']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
