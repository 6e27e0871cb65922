"""`autotune report` on real studies: the smoke study, a study full of failures, one trial, none,
only failures; markup in the database shown as text; PNG sizes; no torch in the process."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from autotune.report.figures import FIG_H_PX, FIG_W_PX
from autotune.storage import Store
from autotune.testing.synthetic_study import fill_study
from autotune.trial import EvalPoint, TrialResult, TrialState
from tests.conftest import REPO, tiny_spec

CliFn = Callable[..., tuple[int, str, str]]
FIGURE_NAMES = ("history", "curves", "importance", "slice", "cost")
SECTIONS = ("summary", "history", "curves", "importance", "slice", "cost", "trials")
# Markup that would run if it reached the page unescaped: both set window.__pwned.
EVIL = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, after checking the PNG signature."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert head[12:16] == b"IHDR"
    w, h = struct.unpack(">II", head[16:24])
    return int(w), int(h)


def section_order(html: str) -> list[str]:
    return [m for m in re.findall(r'<h2 id="([a-z]+)"', html) if m in SECTIONS]


def test_smoke_report_has_every_section_and_figure(smoke: tuple[str, Path]) -> None:
    url, tmp = smoke
    html = (tmp / "report.html").read_text()
    assert section_order(html) == list(SECTIONS)
    store = Store.open(url, create=False)
    rows, best = store.trials("smoke"), store.best("smoke")
    store.close()
    assert best is not None
    # Every trial is a row of the table; the best trial and its peft config are in the header.
    assert html.count('<tr><td class="n">') >= len(rows)
    snippet = re.search(r'<pre id="peft-snippet">(.*?)</pre>', html, re.S)
    assert snippet is not None
    text = snippet.group(1)
    assert f"r={best['rank']}," in text
    assert f"lora_alpha={2 * best['rank']}," in text
    assert "target_modules=[" in text  # the names the trial wrapped, not the spec's preset
    for module in best["target_modules"]:
        assert f"&#39;{module}&#39;" in text
    assert "CAUSAL_LM" in text
    assert html.count('<img class="figure"') == len(FIGURE_NAMES)
    assert "http://" not in html.replace("http://www.w3.org", "")
    assert "https://" not in html  # nothing to fetch


def test_pngs_are_decodable_and_of_the_stated_size(smoke: tuple[str, Path]) -> None:
    _, tmp = smoke
    files = sorted((tmp / "png").glob("*.png"))
    assert sorted(p.stem for p in files) == sorted(FIGURE_NAMES)
    for p in files:
        assert png_size(p) == (FIG_W_PX, FIG_H_PX), p.name
    from PIL import Image

    for p in files:
        with Image.open(p) as im:
            im.load()  # decodes the whole image, not just the header
            assert im.size == (FIG_W_PX, FIG_H_PX)
            assert len(im.getcolors(maxcolors=1 << 16) or range(1 << 16)) > 10, f"{p.name} is blank"


def _add_row(store: Store, name: str, number: int, state: TrialState, error: str, evals: int) -> None:
    """States a short CPU run cannot produce on demand (pruned, crashed), written as the driver does."""
    store.trial_started(name, number, {"rank": 4, "batch_size": 8, "learning_rate": 5e-3}, "test:0")
    if state == TrialState.CRASHED:
        assert store.fail_running(name, number, state, error, requeued=False)
        return
    curve = [EvalPoint(k, k * 4, k * 32, 5.0 - k, 4.0, 5.4 - k) for k in range(1, evals + 1)]
    r = TrialResult(state=state, score=curve[-1].score, wall_time_s=0.5, error=error, curve=curve)
    assert store.trial_finished(name, number, r)


def test_report_on_failures(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOTUNE_FAULTS", "oom@batch_size=32,nan@batch_size=16")
    search = {
        "rank": {"choices": [4]},
        "batch_size": {"choices": [8, 16, 32]},
        "learning_rate": {"choices": [5e-3, 1e-2]},
    }
    spec = write_spec(tiny_spec(name="faults", sampler="grid", search=search, n_trials=6))
    code, _, err = cli("run", str(spec), "--storage", db_url, "--no-progress")
    assert code == 0, err
    store = Store.open(db_url, create=False)
    _add_row(store, "faults", 6, TrialState.PRUNED, "pruned at evaluation 1/2 (step 4)", 1)
    _add_row(store, "faults", 7, TrialState.CRASHED, "RuntimeError: boom\nTraceback ...", 0)
    states = sorted(r["state"] for r in store.trials("faults"))
    store.close()
    assert states == ["complete", "complete", "crashed", "diverged", "diverged", "oom", "oom", "pruned"]

    out = tmp_path / "r.html"
    code, _, err = cli("report", "faults", "--storage", db_url, "--out", str(out))
    assert code == 0, err
    html = out.read_text()
    for state, n in (("complete", 2), ("pruned", 1), ("oom", 2), ("diverged", 2), ("crashed", 1)):
        assert re.search(rf'<tr><td>{state}</td><td class="n">{n}</td>', html), state
    for state in ("oom", "diverged", "crashed"):
        assert html.count(f'<td class="state-failed">{state}</td>') == states.count(state)
    assert "out of memory" in html
    assert "non-finite loss" in html
    assert "RuntimeError: boom" in html
    assert 'id="no-complete"' not in html
    assert html.count('<img class="figure"') == len(FIGURE_NAMES)


def test_one_trial_only_failures_and_nothing(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_spec(tiny_spec(name="one", n_trials=1))
    assert cli("run", str(spec), "--storage", db_url, "--no-progress")[0] == 0
    code, _, err = cli("report", "one", "--storage", db_url, "--out", str(tmp_path / "one.html"))
    assert code == 0, err
    html = (tmp_path / "one.html").read_text()
    assert "needs at least 2 complete trials" in html
    assert "figure importance" in err
    assert html.count('<img class="figure"') == len(FIGURE_NAMES) - 1

    monkeypatch.setenv("AUTOTUNE_FAULTS", "oom")
    spec = write_spec(tiny_spec(name="doomed", n_trials=2), "doomed.yaml")
    assert cli("run", str(spec), "--storage", db_url, "--no-progress")[0] == 1  # no trial completed
    code, _, err = cli("report", "doomed", "--storage", db_url, "--out", str(tmp_path / "doomed.html"))
    assert code == 0, err
    html = (tmp_path / "doomed.html").read_text()
    assert 'id="no-complete"' in html
    assert "oom (2)" in html
    assert "no complete trial" in err
    assert '<img class="figure" id="fig-history"' in html  # the failures are still plotted

    store = Store.open(db_url, create=False)
    store.save_study("empty", "name: empty\n", None)
    store.close()
    for argv, needle in (
        (["report", "empty", "--out", str(tmp_path / "e.html")], "no trials yet"),
        (["report", "nosuch", "--out", str(tmp_path / "e.html")], "no study named 'nosuch'"),
        (["report", "one"], "--out"),
        (["report", "one", "--out", str(tmp_path / "missing" / "x.html")], "does not exist"),
    ):
        code, _, err = cli(*argv, "--storage", db_url)
        assert code == 2, (argv, err)
        assert needle in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, (argv, err)
    assert not (tmp_path / "e.html").exists()


def test_markup_from_the_database_is_shown_as_text(tmp_path: Path, cli: CliFn) -> None:
    url = f"sqlite:///{tmp_path / 'evil.db'}"
    name = f"evil{EVIL}"
    fill_study(url, name=name, n_trials=30, error_text=f"crash {EVIL}", data_source=f"builtin:{EVIL}")
    out = tmp_path / "evil.html"
    code, _, err = cli("report", name, "--storage", url, "--out", str(out))
    assert code == 0, err
    html = out.read_text()
    assert "<script" not in html
    assert "<img src=x" not in html
    assert 'onerror="' not in html
    escaped = "&lt;script&gt;window.__pwned=1&lt;/script&gt;"
    assert escaped in html.split('<h2 id="summary">')[0]  # the title and heading
    assert html.count(escaped) >= 4  # name, spec summary, spec YAML, error cells


def test_report_imports_no_torch(smoke: tuple[str, Path]) -> None:
    url, tmp = smoke
    code = (
        "import sys; from autotune.cli.main import main; "
        f"rc = main(['report', 'smoke', '--storage', {url!r}, '--out', {str(tmp / 'again.html')!r}]); "
        "print(rc, sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "0 []", proc.stderr
