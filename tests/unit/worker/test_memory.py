"""CPU peak memory: what a trial adds above its baseline, also after other trials in the process."""

from __future__ import annotations

from pathlib import Path

from autotune.spec import parse_spec
from autotune.trial import TrialState, trial_config
from autotune.worker.run_trial import run_trial
from tests.conftest import tiny_spec


def test_peak_follows_batch_size_after_earlier_trials(tmp_path: Path) -> None:
    """Memory a previous trial freed is given back before the next trial's baseline: otherwise
    a trial reusing it would report almost nothing."""
    spec = parse_spec(
        tiny_spec(
            model={
                "name": "tiny",
                "tiny": {"hidden_size": 256, "num_layers": 2, "num_heads": 4, "intermediate_size": 1024},
            },
            data={"source": "builtin:smoke", "max_length": 64, "max_examples": 400},
            # evaluation batches are at least 64 examples: keep them few, so training sets the peak
            budget={"train_examples": 128, "evals": 2, "max_eval_examples": 16},
        )
    )
    peaks = []
    for bs in (16, 64, 16, 64):  # the first trial also pays one-time allocations: not compared
        r = run_trial(
            trial_config(spec, {"rank": 8, "batch_size": bs, "learning_rate": 1e-3}, str(tmp_path)), lambda k, s: False
        )
        assert r.state == TrialState.COMPLETE, r.error
        assert r.peak_memory_mb is not None, r.error
        peaks.append(r.peak_memory_mb)
    _, big, small, again = peaks
    assert big > 1.5 * small, peaks
    assert again > 1.5 * small, peaks  # activations scale with the batch
    assert again > 0.6 * big, peaks  # the last trial is not hidden inside the heap `big` freed


def test_a_tensor_measures_its_size_whatever_ran_before() -> None:
    """On glibc the CPU figure is malloc's bytes in use (like CUDA's max_memory_allocated), so a
    64 MiB tensor measures 64 MiB, also after a larger one was freed (whose pages glibc keeps,
    which RSS would count or hide depending on the history)."""
    import time

    import pytest
    import torch

    from autotune.worker.memory import MemoryMeter, memory_kind

    if memory_kind("cpu") != "cpu_allocated_above_baseline":
        pytest.skip("no glibc mallinfo2 here: the CPU figure is RSS")
    peaks = []
    for before in (0, 256, 0):
        if before:
            freed = torch.ones(before * 2**18)  # before MiB of float32, freed again
            del freed
        with MemoryMeter(torch.device("cpu")) as meter:
            held = torch.ones(16 * 2**20)  # 64 MiB
            time.sleep(0.05)  # several of the meter's 5 ms samples
            del held
        peaks.append(meter.peak_mb())
    assert peaks == pytest.approx([64.0] * 3, rel=0.02)
