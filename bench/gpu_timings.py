"""GPU timings for a lent GPU (issue 22), one figure per line; bench/gpu_check.sh runs it.

- step time of MiniLM at batch 64 by rank: 12 vs 16 and 24 vs 32 (tensor cores take multiples of 8,
  so a rank of 12 may cost what 16 does: what `lora.align_rank: 8` is for);
- a batch's host-to-GPU copy from pinned vs pageable memory (worker/data.to_device, AUTOTUNE_PIN).
Writes bench/results/gpu_timings.json. Run: python bench/gpu_timings.py
"""

from __future__ import annotations

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


def step_s(rank: int, repeats: int = 3) -> float:
    from autotune.worker.run_trial import run_trial

    data = load_spec(REPO / "studies" / "quickstart.yaml").model_dump(mode="json")
    data["budget"] = {**data["budget"], "train_examples": 64 * 40, "evals": 1, "max_eval_examples": 64}
    spec = parse_spec(data, "gpu timings")
    times = []
    for _ in range(repeats):
        r = run_trial(trial_config(spec, {"rank": rank, "batch_size": 64, "learning_rate": 1e-3}), lambda k, s: False)
        assert r.state.value == "complete", r.error
        times.append(r.train_time_s / r.optimizer_steps)
    return statistics.median(times)


def copy_ms(pinned: bool, rows: int = 64, width: int = 512, repeats: int = 200) -> float:
    import torch

    t = torch.randint(0, 30000, (rows, width))
    dev = torch.device("cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
        (t.pin_memory() if pinned else t).to(dev, non_blocking=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        (t.pin_memory() if pinned else t).to(dev, non_blocking=True)
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / repeats


def main() -> None:
    import torch

    if not torch.cuda.is_available():
        sys.exit("gpu_timings: no CUDA device")
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(0)}
    out["step_s"] = {r: step_s(r) for r in (12, 16, 24, 32)}
    out["copy_ms"] = {"pinned": copy_ms(True), "pageable": copy_ms(False)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu_timings.json").write_text(json.dumps(out, indent=2) + "\n")
    s = out["step_s"]
    print(f"gpu device={out['device']}")
    print(f"gpu minilm_b64_step_ms rank12={1e3 * s[12]:.2f} rank16={1e3 * s[16]:.2f} ratio={s[12] / s[16]:.2f}")
    print(f"gpu minilm_b64_step_ms rank24={1e3 * s[24]:.2f} rank32={1e3 * s[32]:.2f} ratio={s[24] / s[32]:.2f}")
    c = out["copy_ms"]
    print(f"gpu copy_64x512_ms pinned={c['pinned']:.3f} pageable={c['pageable']:.3f}")


if __name__ == "__main__":
    main()
