"""``autotune report``: one offline HTML file (and optionally PNGs) that shows a study.

data (read the database) -> figures (matplotlib PNGs) -> html (jinja2, autoescaped). Nothing
here imports torch; optuna and matplotlib are imported only when a report is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReportSummary:
    trials: int
    complete: int
    figures: list[str]  # names of the figures drawn
    skipped: list[str]  # "name: reason" for figures that could not be drawn
    html_path: Path | None
    html_bytes: int
    png_paths: list[Path]


def write_report(url: str, study: str, out: str | Path | None, png_dir: str | Path | None) -> ReportSummary:
    from autotune.report.data import gather
    from autotune.report.figures import draw_all
    from autotune.report.html import render

    data = gather(url, study)
    figures = draw_all(data)
    html_path: Path | None = None
    size = 0
    if out is not None:
        html_path = Path(out)
        text = render(data, figures).encode("utf-8")
        html_path.write_bytes(text)
        size = len(text)
    pngs: list[Path] = []
    if png_dir is not None:
        folder = Path(png_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for f in figures:
            if f.png is not None:
                path = folder / f"{f.name}.png"
                path.write_bytes(f.png)
                pngs.append(path)
    return ReportSummary(
        trials=len(data.trials),
        complete=len(data.complete),
        figures=[f.name for f in figures if f.png is not None],
        skipped=[f"{f.name}: {f.note}" for f in figures if f.png is None],
        html_path=html_path,
        html_bytes=size,
        png_paths=pngs,
    )
