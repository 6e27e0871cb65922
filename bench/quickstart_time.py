"""What a new user sees: `autotune run studies/quickstart.yaml` from the command line, timed end to
end (process start, imports, the data built, the probe, every trial), into a fresh database and
cold data caches; then what `autotune best` says. Writes bench/results/quickstart_time.json and
ends with:

    quickstart wall_s=W trials=N complete=C best_accuracy=A

Run on an idle machine: python bench/quickstart_time.py [--spec studies/quickstart.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="studies/quickstart.yaml")
    ap.add_argument("--confirm-top", type=int, default=None,
                    help="run the spec with this budget.confirm_top (0: the search alone, the default before "
                    "2026-12-05); writes quickstart_time_confirmN.json")  # fmt: skip
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, AUTOTUNE_CACHE_DIR=f"{tmp}/cache", AUTOTUNE_STORAGE=f"sqlite:///{tmp}/autotune.db",
                   AUTOTUNE_ADAPTERS_DIR=f"{tmp}/adapters")  # fmt: skip
        spec = a.spec
        if a.confirm_top is not None:  # the same spec (and name), the confirmation set as asked
            data = yaml.safe_load((REPO / a.spec).read_text())
            data.setdefault("budget", {})["confirm_top"] = a.confirm_top
            spec = f"{tmp}/{Path(a.spec).name}"
            Path(spec).write_text(yaml.safe_dump(data))
        t0 = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "autotune", "run", spec, "--no-progress"], cwd=REPO, env=env,
                             capture_output=True, text=True, check=False)  # fmt: skip
        wall = time.perf_counter() - t0
        if run.returncode != 0:
            sys.exit(f"quickstart_time: run failed ({run.returncode}): {run.stderr[-500:]}")
        name = a.spec.rsplit("/", 1)[-1].removesuffix(".yaml")
        trials = subprocess.run([sys.executable, "-m", "autotune", "trials", name, "--format", "json"], cwd=REPO,
                                env=env, capture_output=True, text=True, check=True)  # fmt: skip
        best = subprocess.run([sys.executable, "-m", "autotune", "best", name, "--format", "json"], cwd=REPO,
                              env=env, capture_output=True, text=True, check=True)  # fmt: skip
    rows = json.loads(trials.stdout)
    rec = json.loads(best.stdout)
    done = [r for r in rows if r["state"] == "complete"]
    out = {
        "spec": a.spec,
        "wall_s": wall,
        "trials": len(rows),
        "complete": len(done),
        "states": {s: sum(r["state"] == s for r in rows) for s in sorted({r["state"] for r in rows})},
        "trial_wall_s": [r["wall_time_s"] for r in rows],
        "best_accuracy": max((r["accuracy"] or 0.0 for r in done), default=None),
        "recommended": rec,  # what `autotune best` says (after a confirmation: the confirmed mean)
        "summary_line": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "",
    }
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if a.confirm_top is None else f"_confirm{a.confirm_top}"
    (RESULTS / f"quickstart_time{suffix}.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"quickstart wall_s={wall:.1f} trials={len(rows)} complete={len(done)} best_accuracy={out['best_accuracy']}")


if __name__ == "__main__":
    main()
