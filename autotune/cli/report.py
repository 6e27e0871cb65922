"""``autotune report STUDY --out report.html [--png DIR]``: parser and handler.

Kept out of main.py/commands.py (two lines there register it). Never imports torch: the report
reads the database, and draws with matplotlib and Optuna's own importance plot.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from autotune.errors import StorageError
from autotune.storage.url import resolve_url


def add_parser(sub: Any, storage_arg: Any) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report (and PNG figures) of a study")
    p.add_argument("study", help="study name")
    storage_arg(p)
    p.add_argument("--out", metavar="PATH", default=None, help="HTML file to write (offline, self-contained)")
    p.add_argument("--png", metavar="DIR", default=None, help="also write each figure as DIR/<name>.png")


def cmd_report(args: argparse.Namespace) -> int:
    if args.out is None and args.png is None:
        raise StorageError("report: give --out PATH (HTML) and/or --png DIR")
    if args.out is not None and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise StorageError(f"--out {args.out}: directory {os.path.dirname(os.path.abspath(args.out))} does not exist")
    if args.png is not None and os.path.exists(args.png) and not os.path.isdir(args.png):
        raise StorageError(f"--png {args.png}: exists and is not a directory")
    url = resolve_url(args.storage)
    from autotune.report import write_report
    from autotune.report.figures import FIG_H_PX, FIG_W_PX

    try:
        s = write_report(url, args.study, args.out, args.png)
    except OSError as err:
        raise StorageError(f"report: cannot write {err.filename} ({err.strerror})") from None
    if s.complete == 0:
        print(f"note: study '{args.study}' has no complete trial ({s.trials} failed or unfinished)", file=sys.stderr)
    for reason in s.skipped:
        print(f"note: figure {reason}", file=sys.stderr)
    if s.html_path is not None:
        print(f"wrote {s.html_path} ({s.html_bytes / 1e6:.2f} MB, {s.trials} trials)", file=sys.stderr)
    if s.png_paths:
        print(f"wrote {len(s.png_paths)} PNG(s) of {FIG_W_PX}x{FIG_H_PX} px to {args.png}", file=sys.stderr)
    return 0
