"""What a trial process holds on a GPU beyond what a memory prediction covers (issue 23).

A prediction is of ``torch.cuda.max_memory_allocated``. A process also holds its CUDA context, the
cuBLAS/cuDNN workspaces and kernels, and what PyTorch's caching allocator reserved beyond the
peak it allocated. The packing ledger (``autotune/study/ray_backend.py``, ``CUDA_CONTEXT_MB``)
adds that per co-tenant. Measured here: K processes (1, 2, 4) each build a MiniLM-shaped BERT
(hidden 384, 6 layers, 12 heads: all-MiniLM-L6-v2's config, random weights, since the hub is not
reachable), wrap its attention in LoRA rank 16, and train bf16-autocast steps at batch 64 x 48
tokens (the quickstart's shape). Then, while every process holds its memory:

- ``nvidia_smi_mb``: each process's used memory as the driver sees it (nvidia-smi);
- ``device_used_delta_mb``: the device's used memory (cudaMemGetInfo) with the K processes, minus
  without them, divided by K;
- per process: max_memory_allocated and memory_reserved.

``overhead_mb`` = the driver's figure minus max_memory_allocated: what sits outside a prediction.
Writes bench/results/cuda_context.json (or $OUT/cuda_context.json when OUT is set) and prints
    cuda_context k=K overhead_mb_median=X context_only_mb=Y

Run on a GPU machine: python bench/cuda_context.py [--k 1 2 4] [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _child(work: bool, steps: int, ready: Any, done: Any, out: Any) -> None:
    import torch

    torch.zeros(1, device="cuda")  # the context alone
    if work:
        from peft import LoraConfig, get_peft_model
        from transformers import BertConfig, BertForSequenceClassification

        cfg = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                         vocab_size=30522, max_position_embeddings=512)  # fmt: skip
        cfg.num_labels = 8
        model = BertForSequenceClassification(cfg).to(torch.device("cuda"))  # type: ignore[arg-type]  # transformers types .to as a wrapped method
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["query", "key", "value"]))
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        ids = torch.randint(0, 30522, (64, 48), device="cuda")
        labels = torch.randint(0, 8, (64,), device="cuda")
        for _ in range(steps):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    out.put(
        {
            "pid": os.getpid(),
            "max_allocated_mb": torch.cuda.max_memory_allocated() / 2**20,
            "reserved_mb": torch.cuda.memory_reserved() / 2**20,
        }
    )
    ready.set()
    done.wait()


def _smi() -> dict[int, float]:
    try:
        txt = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = [line.split(",") for line in txt.strip().splitlines() if line.strip()]
    return {int(p): float(m) for p, m in rows}


def _device_used_mb() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**20


def measure(k: int, work: bool, steps: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    before = _device_used_mb()
    done = ctx.Event()
    readies = [ctx.Event() for _ in range(k)]
    out = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(work, steps, r, done, out)) for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        r.wait(timeout=300)
    time.sleep(1.0)
    per = [out.get(timeout=60) for _ in range(k)]
    smi = _smi()
    during = _device_used_mb()
    done.set()
    for p in procs:
        p.join(timeout=60)
    for row in per:
        row["nvidia_smi_mb"] = smi.get(row["pid"])
        if row["nvidia_smi_mb"] is not None:
            row["overhead_mb"] = row["nvidia_smi_mb"] - row["max_allocated_mb"]
    delta = (during - before) / k
    overheads = [r["overhead_mb"] for r in per if "overhead_mb" in r]
    return {
        "k": k,
        "work": work,
        "device_used_delta_mb_per_process": delta,
        "device_overhead_mb_per_process": delta - statistics.mean(r["max_allocated_mb"] for r in per),
        "overhead_mb_median": statistics.median(overheads) if overheads else None,
        "processes": per,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    import torch

    torch.zeros(1, device="cuda")  # this process's own context is in "before" and "during" alike
    context_only = measure(1, False, 0)
    runs = [measure(k, True, args.steps) for k in args.k]
    res = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "context_only": context_only,
        "trials": runs,
    }
    dest = Path(os.environ["OUT"]) if os.environ.get("OUT") else RESULTS
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "cuda_context.json").write_text(json.dumps(res, indent=2) + "\n")
    ctx_mb = context_only["device_used_delta_mb_per_process"]
    for r in runs:
        dev = r["device_overhead_mb_per_process"]
        print(f"cuda_context k={r['k']} overhead_mb_median={r['overhead_mb_median']} "
              f"device_overhead_mb_per_process={dev:.0f} context_only_mb={ctx_mb:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
