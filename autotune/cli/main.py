"""The ``autotune`` command line.

Heavy imports happen inside each command: ``best``, ``trials``, ``export`` and ``validate`` never
load torch, transformers or peft, so inspecting results is instant on any machine. User errors are
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from autotune.cli import use
from autotune.cli.estimate import add_estimate_parser
from autotune.cli.limits import add_limit_args
from autotune.errors import EXIT_DB_UNAVAILABLE, EXIT_INTERRUPTED, EXIT_USER_ERROR, USER_ERRORS, DatabaseUnavailable
from autotune.version import __version__


def _storage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage",
        metavar="URL",
        default=None,
        help="database URL (default: $AUTOTUNE_STORAGE, else sqlite:///autotune.db); "
        "prefer the environment variable for a URL with a password",
    )


def _fmt_arg(p: argparse.ArgumentParser, choices: tuple[str, ...], default: str) -> None:
    p.add_argument("--format", choices=choices, default=default, help=f"output format (default: {default})")


def _run_args(p: argparse.ArgumentParser, n_trials_from: str, *, workers: bool) -> None:
    """The options `run`, `resume` and `worker` share (`worker` is one process: no --workers)."""
    _storage_arg(p)
    p.add_argument(
        "--n-trials", type=int, default=None, help=f"total finished trials to reach (default: {n_trials_from} n_trials)"
    )
    if workers:
        p.add_argument("--workers", type=int, default=1, help="worker processes on this machine (default: 1)")
        p.add_argument("--devices", default="auto", help="auto, cpu, or GPU ids like 0,1: one worker per GPU")
        p.add_argument(
            "--backend", choices=("local", "ray"), default="local",
            help="where trials run: local worker processes (default), or Ray actors (pip install -e '.[ray]')",
        )  # fmt: skip
        p.add_argument(
            "--address", default=None, help="with --backend ray: auto, or ray://host:10001 (default: a local Ray)"
        )
        p.add_argument(
            "--pack", action=argparse.BooleanOptionalAction, default=None,
            help="with --backend ray: share a GPU among trials by predicted memory (default: on when there are GPUs)",
        )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument("--cache-dir", default=None, help="tokenized-data cache (default: ~/.cache/autotune)")
    add_limit_args(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autotune", description="Tune LoRA rank, batch size and learning rate with Optuna; results in SQL."
    )
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("run", help="create (or continue) a study from a spec and run trials")
    p.add_argument("spec", help="study spec (YAML)")
    p.add_argument("--study-name", default=None, help="override the spec's name")
    _run_args(p, "spec's", workers=True)
    p.add_argument("--warm-start", default=None, metavar="STUDY", help="seed a new study with STUDY's finished trials")

    p = sub.add_parser("resume", help="continue a stored study until it holds --n-trials finished trials")
    p.add_argument("study", help="study name")
    _run_args(p, "stored spec's", workers=True)

    p = sub.add_parser("worker", help="join an existing study as one worker (any machine sharing the database)")
    p.add_argument("study", help="study name")
    _run_args(p, "stored spec's", workers=False)

    p = sub.add_parser("best", help="show the best finished trial")
    p.add_argument("study", help="study name")
    _storage_arg(p)
    p.add_argument(
        "--format",
        choices=("table", "json", "yaml", "peft", "spec"),
        default="table",
        help="output format (default: table); peft: a LoraConfig + TrainingArguments snippet; spec: a study "
        "spec pinned to this trial",
    )

    p = sub.add_parser("studies", help="list the studies in the database: trials by state, best, live workers")
    _storage_arg(p)
    _fmt_arg(p, ("table", "json", "csv"), "table")

    p = sub.add_parser("trials", help="list every trial with its state")
    p.add_argument("study", help="study name")
    _storage_arg(p)
    _fmt_arg(p, ("table", "json", "csv"), "table")

    p = sub.add_parser("export", help="write one row per trial to a CSV file, or a trial's peft adapter_config.json")
    p.add_argument("study", help="study name")
    _storage_arg(p)
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--csv", metavar="PATH", help="output CSV path ('-' for stdout)")
    out.add_argument(
        "--peft-config",
        metavar="DIR",
        help="write adapter_config.json with peft's LoraConfig.save_pretrained (loads peft and torch)",
    )
    p.add_argument(
        "--trial", type=int, default=None, metavar="N", help="with --peft-config: this trial (default: best)"
    )

    from autotune.cli.report import add_parser as add_report_parser

    add_report_parser(sub, _storage_arg)

    p = sub.add_parser("validate", help="check a spec (and its data) without running anything")
    p.add_argument("spec", nargs="+", help="study spec(s) (YAML)")
    p.add_argument("--no-data", action="store_true", help="check the spec only, not the data it names")

    p = sub.add_parser("db", help="database maintenance")
    dsub = p.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    q = dsub.add_parser("upgrade", help="create or migrate autotune's tables to the latest revision")
    _storage_arg(q)
    q = dsub.add_parser("current", help="show the revision of autotune's tables")
    _storage_arg(q)
    use.add_train_parser(sub)
    add_estimate_parser(sub)
    from autotune.cli.init import add_init_parser

    add_init_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from autotune.cli import commands  # light: no torch

    try:
        return int(commands.dispatch(args) or 0)
    except USER_ERRORS as err:
        print(f"autotune: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except DatabaseUnavailable as err:  # not the user's error: the same command works once it is back
        print(f"autotune: {_one_line(err)}", file=sys.stderr)
        return EXIT_DB_UNAVAILABLE
    except KeyboardInterrupt:
        print("autotune: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _one_line(err: BaseException) -> str:
    from autotune.storage.url import redact

    text = " ".join(str(err).split()) or err.__class__.__name__
    # Database drivers can echo a URL: never let a password through.
    for word in text.split():
        if "://" in word and "@" in word:
            core = word.strip("'\"(),:;")  # "URL:" is the URL and its colon: keep the colon
            text = text.replace(core, redact(core))
    return text


if __name__ == "__main__":
    sys.exit(main())
