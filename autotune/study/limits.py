"""``--time-budget`` / ``--memory-limit`` of one run: typed values the CLI parses once
(cli/outcome.run_limits) and the driver and parallel workers apply to a spec."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.spec import StudySpec


@dataclass(frozen=True)
class RunLimits:
    """``--time-budget`` / ``--memory-limit`` of one run (``run``, ``resume``, ``worker``): they
    override the spec's ``budget.study_time_s`` / ``budget.memory_limit_mb`` for that run only
    and are not part of the study's identity (study/setup.spec_core)."""

    study_time_s: float | None = None
    memory_limit_mb: float | None = None

    def apply(self, spec: StudySpec) -> StudySpec:
        update = {k: v for k, v in (("study_time_s", self.study_time_s), ("memory_limit_mb", self.memory_limit_mb))
                  if v is not None}  # fmt: skip
        if not update:
            return spec
        return spec.model_copy(update={"budget": spec.budget.model_copy(update=update)})

    def argv(self) -> list[str]:
        """The same limits as flags of ``autotune worker`` (parallel workers are subprocesses)."""
        out = []
        if self.study_time_s is not None:
            out += ["--time-budget", f"{self.study_time_s:.3f}s"]
        if self.memory_limit_mb is not None:
            out += ["--memory-limit", f"{self.memory_limit_mb:.3f}MB"]
        return out
