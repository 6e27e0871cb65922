"""An ESTIMATE, not a measurement: how many of the quickstart's trials fit on one 141 GB H200 at
once by their predicted peak memory, and the wall-time gain of packing them (issue 23).

Inputs, both measured on a lent H200 and committed: bench/results/memory_prediction_cuda.json (the
probe's predicted peak of every rank x batch of the quickstart's model, data, length and placement:
its ``bench-mem-minilm`` rows) and bench/results/gpu_packing.json (trials/s of 1, 2 and 4 MiniLM
trials sharing the GPU). Each co-tenant's share is its prediction plus ``CUDA_CONTEXT_MB`` (an
assumption of study/ray_backend.py), against 90% of the GPU, the gate's margin. The gain is read
from the measured run with as many co-tenants as ``--backend ray --pack`` gives a GPU
(``MAX_COTENANTS``): it assumes the study's trials behave as the measured ones did.

Writes bench/results/packing_estimate.json and ends with:
    packing_estimate fit_by_memory_min=A fit_by_memory_max=B slots_per_gpu=K expected_gain=G (estimate)

Run: python bench/packing_estimate.py [--gpu-mb 143771]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from autotune.costs.calibration import CUDA_MARGIN  # noqa: E402
from autotune.study.ray_backend import CUDA_CONTEXT_MB, MAX_COTENANTS  # noqa: E402

RESULTS = REPO / "bench" / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-mb", type=float, default=143771.0, help="the GPU's memory (nvidia-smi on the lent H200)")
    a = ap.parse_args()
    rows = [r for r in json.loads((RESULTS / "memory_prediction_cuda.json").read_text())["rows"]
            if r["model"] == "bench-mem-minilm" and not r["checkpointed"]]  # fmt: skip
    packing = json.loads((RESULTS / "gpu_packing.json").read_text())
    gains = {int(r["k"]): float(r["gain"]) for r in packing["runs"]}
    usable = a.gpu_mb * CUDA_MARGIN
    fits = {
        f"r{r['rank']}_b{r['batch_size']}": math.floor(usable / (r["pred_memory_mb"] + CUDA_CONTEXT_MB)) for r in rows
    }
    k = min(MAX_COTENANTS, min(fits.values()))
    out = {
        "label": "estimate",
        "gpu_mb": a.gpu_mb,
        "margin": CUDA_MARGIN,
        "cuda_context_mb_assumed": CUDA_CONTEXT_MB,
        "fit_by_memory": fits,
        "slots_per_gpu": k,
        "expected_gain": gains.get(k),
        "measured_gains": gains,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "packing_estimate.json").write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"packing_estimate fit_by_memory_min={min(fits.values())} fit_by_memory_max={max(fits.values())} "
        f"slots_per_gpu={k} expected_gain={gains.get(k)} (estimate)"
    )


if __name__ == "__main__":
    main()
