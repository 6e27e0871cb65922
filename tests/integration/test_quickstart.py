"""A shortened quickstart: the real pretrained MiniLM, the real docstring data, 2 small trials."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.conftest import REPO

CliFn = Callable[..., tuple[int, str, str]]


def test_short_quickstart_learns(cli: CliFn, tmp_path: Path, db_url: str) -> None:
    spec = yaml.safe_load((REPO / "studies" / "quickstart.yaml").read_text())
    spec["budget"] = {"train_examples": 512, "evals": 2, "max_eval_examples": 128}
    spec["search"]["rank"] = {"choices": [8]}
    spec["search"]["batch_size"] = {"choices": [16]}
    spec["search"]["learning_rate"] = {"choices": [3.0e-3]}
    spec["sampler"] = "grid"
    spec["n_trials"] = 1
    path = tmp_path / "qs.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, _, err = cli("run", str(path), "--storage", db_url, "--no-progress")
    assert code == 0, err
    code, out, err = cli("best", "quickstart", "--storage", db_url, "--format", "json")
    assert code == 0, err
    best = json.loads(out)
    # 8 labels: chance is 0.125. 32 steps of LoRA on a pretrained encoder beat it at least twofold.
    print(f"short quickstart accuracy {best['accuracy']:.3f}")
    assert best["accuracy"] > 2 * 0.125, best
    assert best["params"] == {"rank": 8, "batch_size": 16, "learning_rate": 3.0e-3}
