"""`search.expand_bounds: true`: a best at a bound starts a widened, warm-started follow-up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from autotune.spec import parse_spec_yaml
from autotune.storage import Store
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


@pytest.mark.slow  # up to 8 tiny trials: 30 s of CPU
def test_a_best_on_the_edge_widens_the_range(cli: CliFn, db_url: str, write_spec: Callable[..., Path]) -> None:
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
    code, _, err = cli("run", str(write_spec(spec)), "--storage", db_url, "--no-progress")
    assert code == 0, err
    assert "expand_bounds: best of 'e' at the edge; widening learning_rate" in err
    store = Store.open(db_url, create=False)
    row = store.get_study("e-wide1")
    assert row is not None
    lrs = parse_spec_yaml(row.spec_yaml).search.learning_rate.choices
    assert lrs is not None and len(lrs) == 3 and (min(lrs) == 1e-3 or max(lrs) == 8e-3)
    assert len(store.trials("e-wide1")) == 3  # at least 3 follow-up trials; the priors are not its own
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
    from autotune import expand
    from autotune.session import RunSummary
    from autotune.spec import parse_spec

    spec = tiny_spec("f", n_trials=2, search={"rank": {"choices": [4]}, "batch_size": {"choices": [16]},
                                              "learning_rate": {"choices": [2e-3, 4e-3]}})  # fmt: skip
    assert cli("run", str(write_spec(spec)), "--storage", db_url, "--no-progress")[0] == 0
    store = Store.open(db_url, create=False)
    first = store.best("f")
    store.close()
    assert first is not None
    calls: list[str] = []

    def worse_study(spec: object, url: str, *, study_name: str, **_: object) -> RunSummary:
        calls.append(study_name)  # a follow-up whose only trial ends worse than the first study's best
        s = Store.open(url, create=False)
        s.save_study(study_name, "name: x\n", None)
        s.close()
        return RunSummary(study_name, 1, 1, 1, False, first["score"] + 1)

    monkeypatch.setattr(expand, "run_study", worse_study)
    monkeypatch.setattr(expand, "warm_start", lambda *a, **k: 0)
    capsys.readouterr()
    expand.expand_after(parse_spec(spec), db_url, "f", show_progress=False, cache_dir=None)
    err = capsys.readouterr().err
    assert calls == ["f-wide1"], err
    assert f"found nothing better (no complete trial); the best stays trial {first['trial_number']} of 'f'" in err
