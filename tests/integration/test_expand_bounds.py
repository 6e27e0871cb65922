"""`search.expand_bounds: true`: a best at a bound starts a widened, warm-started follow-up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from autotune.spec import parse_spec_yaml
from autotune.storage import Store
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


@pytest.mark.slow  # up to 8 tiny trials: 30 s of CPU (with 2 worker processes, their start-up too)
@pytest.mark.parametrize("workers", [[], ["--workers", "2", "--devices", "cpu"]], ids=["one", "two-workers"])
def test_a_best_on_the_edge_widens_the_range(
    cli: CliFn, db_url: str, write_spec: Callable[..., Path], workers: list[str]
) -> None:
    """With N workers too: the follow-up study runs with the same workers (it was skipped)."""
    # one rank and one batch (nothing to widen there); two learning rates: the best is on an edge
    spec = tiny_spec(
        "e",
        n_trials=2,
        search={
            "rank": {"choices": [4]},
            "batch_size": {"choices": [16]},
            "learning_rate": {"choices": [2e-3, 4e-3]},
            "expand_bounds": True,
        },
    )
    code, _, err = cli("run", str(write_spec(spec)), "--storage", db_url, "--no-progress", *workers)
    assert code == 0, err
    assert "expand_bounds: best of 'e' at the edge; widening learning_rate" in err
    store = Store.open(db_url, create=False)
    row = store.get_study("e-wide1")
    assert row is not None
    lrs = parse_spec_yaml(row.spec_yaml).search.learning_rate.choices
    best = store.best("e")
    assert best is not None
    # the bound the best sits on moves (one more step of the choices' ratio), and only that one
    expected = [2e-3, 4e-3, 8e-3] if best["params"]["learning_rate"] == 4e-3 else [1e-3, 2e-3, 4e-3]
    assert lrs == pytest.approx(expected), (best["params"], lrs)
    # at least 3 follow-up trials (the space's 3 configs); the priors are not its own, and a second
    # worker's proposal of a config already running is stored as its duplicate, not trained
    trained = [r for r in store.trials("e-wide1") if r["state"] != "duplicate"]
    assert sorted(r["params"]["learning_rate"] for r in trained) == pytest.approx(expected), trained
    assert store.get_study("e-wide3") is None  # at most MAX_EXPANSIONS (2) widenings
    store.close()


def test_a_widening_that_finds_nothing_better_ends_the_expansion(
    cli: CliFn,
    db_url: str,
    write_spec: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The follow-up study's best is worse than the first study's: no second widening (which
    would chase the worse study's own edge), and the summary names where the best stays."""
    from autotune.spec import parse_spec
    from autotune.study import expand
    from autotune.study.summary import RunSummary

    spec = tiny_spec("f", n_trials=2, search={"rank": {"choices": [4]}, "batch_size": {"choices": [16]},
                                              "learning_rate": {"choices": [2e-3, 4e-3]}})  # fmt: skip
    assert cli("run", str(write_spec(spec)), "--storage", db_url, "--no-progress")[0] == 0
    store = Store.open(db_url, create=False)
    first = store.best("f")
    store.close()
    assert first is not None
    calls: list[str] = []

    def worse_study(spec: object, study_name: str, n_trials: int) -> RunSummary:
        calls.append(study_name)  # a follow-up whose only trial ends worse than the first study's best
        s = Store.open(db_url, create=False)
        s.save_study(study_name, "name: x\n", None)
        s.close()
        return RunSummary(study_name, 1, 1, 1, False, first["score"] + 1)

    monkeypatch.setattr(expand, "warm_start", lambda *a, **k: 0)
    capsys.readouterr()
    expand.expand_after(parse_spec(spec), db_url, "f", worse_study)
    err = capsys.readouterr().err
    assert calls == ["f-wide1"], err
    assert f"found nothing better (no complete trial); the best stays trial {first['trial_number']} of 'f'" in err
