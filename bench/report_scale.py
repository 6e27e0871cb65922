"""How big and how slow is `autotune report` on a 1,000-trial study?

Fills a fresh SQLite database with N synthetic trials (default 1,000) and their curves through the
real write paths: ``Store.save_study`` / ``trial_started`` / ``trial_finished`` for autotune's
tables, and Optuna's ``RDBStorage`` (``study.add_trials``) for the Optuna study the importance
plot reads. The scores follow a made-up but plausible landscape (a learning-rate valley, a small
rank effect, noise), and the states mix as a real study's might: complete, pruned (curves cut),
oom (large batch x rank), diverged (high learning rate), timeout and crashed (with a traceback).

Then it times ``python -m autotune report`` in a fresh process (imports included, as a user
would see it), writes bench/results/report_scale.json and ends with:
    report_1000_trials_mb=X report_1000_trials_s=Y

Run: python bench/report_scale.py [--trials 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--keep", default=None, help="write the database and report here instead of a temp dir")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="report-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "scale.db"
    db.unlink(missing_ok=True)
    url = f"sqlite:///{db}"
    t0 = time.perf_counter()
    from autotune.testing.synthetic_study import fill_study

    counts = fill_study(url, n_trials=args.trials)
    fill_s = time.perf_counter() - t0
    out = work / "report.html"
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    cmd = [sys.executable, "-m", "autotune", "report", "scale", "--storage", url, "--out", str(out)]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=repo)
    report_s = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the report process: on a shared machine the wall time also counts waiting.
    cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"report failed ({proc.returncode}): {proc.stderr.strip()}")
    mb = out.stat().st_size / 1e6
    res = {
        "trials": args.trials,
        "states": counts,
        "fill_s": round(fill_s, 2),
        "report_s": round(report_s, 2),
        "report_cpu_s": round(cpu_s, 2),
        "report_mb": round(mb, 3),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "report_stderr": proc.stderr.strip(),
        "cpu_count": os.cpu_count(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "report_scale.json").write_text(json.dumps(res, indent=2) + "\n")
    print(f"filled {args.trials} trials {counts} in {fill_s:.1f} s; report at {out}")
    print(proc.stderr.strip())
    print(f"report process: {cpu_s:.2f} s CPU, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"report_{args.trials}_trials_mb={mb:.2f} report_{args.trials}_trials_s={report_s:.2f}")


if __name__ == "__main__":
    main()
