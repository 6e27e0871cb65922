"""Pick the autocast dtype by hardware, once per trial.

``auto``: bf16 autocast on CUDA that supports it; fp16 autocast + GradScaler on older CUDA; fp32 on
a CPU. On the AVX2 CPUs we run CI on, bf16 autocast measured 4-17x slower than fp32
(docs/architecture.md, "Measured facts"), so a CPU only gets bf16 when the user asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Precision:
    name: str  # "fp32", "bf16" or "fp16": what actually runs
    autocast_dtype: torch.dtype | None
    use_scaler: bool


def pick_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def pick_precision(requested: str, device: torch.device) -> Precision:
    if device.type == "cuda":
        bf16_ok = torch.cuda.is_bf16_supported()
        if requested == "auto":
            requested = "bf16" if bf16_ok else "fp16"
        if requested == "bf16":
            return Precision("bf16", torch.bfloat16, use_scaler=False)
        if requested == "fp16":
            return Precision("fp16", torch.float16, use_scaler=True)
        return Precision("fp32", None, use_scaler=False)
    # CPU: fp16 autocast is not a CPU training mode; bf16 only when asked for explicitly.
    if requested == "bf16":
        return Precision("bf16", torch.bfloat16, use_scaler=False)
    return Precision("fp32", None, use_scaler=False)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
