"""The calibration probe's wall time on the quickstart, before and after it evaluated a sample.

Each probed config ran one evaluation pass over the whole validation split (5 passes a probe:
30% of the probe's time in a cProfile); now it evaluates the widest batch of the trial's
evaluation (it sets the peak) and one more (the seconds per token). Both variants run in turns in
this process, the base model and tokenized data already cached (as in a study, where the probe's
loads serve the trials), so the figure is the probe's own work. Also reported: the predictions
each variant makes for the largest config, to show the sample does not change them.

Writes bench/results/probe_cost.json and ends with ``probe_s full_eval=X sampled_eval=Y ratio=R``.

Run on an idle machine: python bench/probe_cost.py [--spec studies/quickstart.yaml] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(HERE.parent / "studies" / "quickstart.yaml"))
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    from autotune.costs import probe
    from autotune.costs.model import CostModel
    from autotune.spec import load_spec
    from autotune.worker import data as wdata

    spec = load_spec(args.spec)
    sampled = probe._eval_sample

    def full(split: Any, c: Any) -> Any:  # before: the whole evaluation pass
        return wdata.eval_batches(split.validation, max(c.batch_size, 64), c.budget.max_eval_examples)

    variants = {"full_eval": full, "sampled_eval": sampled}
    probe.calibrate(spec)  # warm-up: the model and the data into the worker's caches
    secs: dict[str, list[float]] = {v: [] for v in variants}
    preds: dict[str, Any] = {}
    big = (int(max(spec.search.rank.choices or [8])), int(max(spec.search.batch_size.choices or [16])))
    for _ in range(args.rounds):
        for name, fn in variants.items():
            probe._eval_sample = fn
            cal = probe.calibrate(spec)
            secs[name].append(cal.probe_s)
            p = CostModel(cal).predict(*big)
            preds[name] = {"peak_memory_mb": p.peak_memory_mb, "trial_time_s": p.trial_time_s}
    probe._eval_sample = sampled
    med = {v: statistics.median(xs) for v, xs in secs.items()}
    out = {"spec": args.spec, "probe_s": secs, "median_probe_s": med,
           "ratio_sampled_to_full": med["sampled_eval"] / med["full_eval"],
           "largest_config": {"rank": big[0], "batch_size": big[1]}, "predictions_largest_config": preds}  # fmt: skip
    (HERE / "results" / "probe_cost.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"probe_s full_eval={med['full_eval']:.1f} sampled_eval={med['sampled_eval']:.1f} "
          f"ratio={out['ratio_sampled_to_full']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
