"""The report's peft snippet is the one ``autotune best --format peft`` prints (autotune/answer.py):
the resolved target modules stored with the trial, and the matching TrainingArguments."""

from __future__ import annotations

from typing import Any

from autotune import answer
from autotune.spec import StudySpec


def peft_snippet(best: dict[str, Any], spec: StudySpec) -> str:
    return answer.peft_snippet(spec.name, best, spec)
