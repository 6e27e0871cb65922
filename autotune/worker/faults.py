"""Fault injection for tests of worker processes: ``AUTOTUNE_FAULTS`` in the environment.

Subprocess workers cannot be monkeypatched, so the failure tests (OOM, NaN, slow steps to kill or
interrupt mid-trial) set this variable instead. Comma-separated rules, each ``KIND[@KEY=VALUE]``:

    oom                 every training step raises torch.OutOfMemoryError
    oom@batch_size=32   only trials with batch size 32
    oom@once=/tmp/flag  the first step anywhere that finds no file /tmp/flag (then creates it)
    nan@batch_size=16   the loss becomes NaN
    slow=0.05           every step sleeps 0.05 s (a trial long enough to kill mid-way)
    crash               every training step raises RuntimeError("injected crash") (the same message
                        each time: the driver's repeated-crash stop)

Unset (the normal case) it costs one dict lookup per trial.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from autotune.trial import TrialConfig

ENV_VAR = "AUTOTUNE_FAULTS"


@dataclass(frozen=True)
class Faults:
    oom: bool = False
    nan: bool = False
    slow_s: float = 0.0
    once_flag: str | None = None
    crash: bool = False

    @property
    def active(self) -> bool:
        return self.oom or self.nan or self.slow_s > 0 or self.crash


def faults_for(config: TrialConfig) -> Faults:
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return Faults()
    oom = nan = crash = False
    slow = 0.0
    once: str | None = None
    for rule in raw.split(","):
        kind, _, cond = rule.strip().partition("@")
        kind, _, value = kind.partition("=")
        if cond:
            key, _, want = cond.partition("=")
            if key == "once":
                once = want
            elif str(getattr(config, key, None)) != want:
                continue
        if kind == "oom":
            oom = True
        elif kind == "nan":
            nan = True
        elif kind == "slow":
            slow = float(value or 0.05)
        elif kind == "crash":
            crash = True
    return Faults(oom=oom, nan=nan, slow_s=slow, once_flag=once, crash=crash)


def before_step(f: Faults) -> None:
    if f.slow_s:
        time.sleep(f.slow_s)
    if f.crash:
        raise RuntimeError("injected crash (AUTOTUNE_FAULTS)")
    if f.oom:
        if f.once_flag is not None:
            if os.path.exists(f.once_flag):
                return
            open(f.once_flag, "w").close()
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected by AUTOTUNE_FAULTS)")


def after_loss(f: Faults, loss: torch.Tensor) -> torch.Tensor:
    return loss * float("nan") if f.nan else loss
