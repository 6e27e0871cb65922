"""Does the search earn its keep? The 36-run grid against autotune's search, on real studies.

Two commands (issue 10):

``grid``: the classic grid (rank {4,8,16,32} x batch {16,32,64} x 3 learning rates: the low end,
the log-middle and the high end of the spec's range) on the spec's model, data, budget and
objective, every config to the end of its budget (pruner none), through the real driver in one
process (base model and tokenized data loaded once). Writes one CSV row per config as it ends,
then re-runs ``--reseed`` configs (best, middle, worst) with another training seed and writes the
seed-to-seed spread. In one process:

    python bench/search_efficiency.py grid --spec studies/quickstart.yaml

The committed quickstart table was made in 4 processes, one per rank (``--ranks R --out F
--resume``), merged, plus ``--only-reseed``: a config took 4-10 min on the loaded 2-core VM (see
docs/search.md for the exact commands and the figures).

``race``: a strategy (``tpe_asha``: autotune's default search, the spec defaults of SamplerSpec
and PrunerSpec; ``random_asha``; ``random``: no pruning; ``grid``: the same grid in a random
order) runs real studies, one per sampler seed, until its best score is within 1% of the grid's
best (and at least ``n_trials`` of the spec have run, for the fixed-study figure) or the grid's
whole compute is spent. Compute = training examples processed, pruned trials' partial work
included (``examples_seen`` of every trial); wall time is recorded too. The training seed stays
the grid's (the spec's ``seed``), so strategies differ only in which configs they try. Each
strategy appends to its own CSV (resumable: finished seeds are skipped), so strategies can run
in separate processes; the summary reads every strategy's CSV and ends with

    tpe_asha_share=X random_asha_share=Y random_share=Z grid_share=W reached=K/5

(median shares of the grid's compute until within 1%; a seed that never gets there within the
grid's compute counts as 1.0; K counts tpe_asha's seeds that got there).

``replay``: the grid in a random order over the committed grid table, many seeds: cheap, and
labelled a replay (the runs are the grid's real ones, only the order is drawn).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from autotune.spec import PrunerSpec, SamplerSpec, StudySpec, load_spec, parse_spec  # noqa: E402
from autotune.trial import ReportFn, TrialConfig, TrialFn, TrialResult, TrialState  # noqa: E402

if TYPE_CHECKING:
    from autotune.search.samplers import SamplerFactory

RESULTS = REPO / "bench" / "results"
STRATEGIES = {
    "tpe_asha": ("tpe", "asha"),
    "random_asha": ("random", "asha"),
    "random": ("random", "none"),
    "grid": ("grid", "none"),
}
WITHIN = 0.01  # "as good as the grid": within 1% of the grid's best score (issue 10)
GRID_FIELDS = [
    "rank", "batch_size", "learning_rate", "train_seed", "state", "score", "val_loss", "train_loss",
    "accuracy", "examples_seen", "wall_time_s", "train_time_s", "curve",
]  # fmt: skip
RACE_FIELDS = [
    "strategy", "seed", "trial", "rank", "batch_size", "learning_rate", "state", "score", "examples_seen",
    "compute", "best", "wall_s",
]  # fmt: skip


def _stem(spec: StudySpec) -> str:
    return spec.name


def grid_lrs(spec: StudySpec) -> list[float]:
    """Low end, log-middle, high end of the spec's learning-rate range (or its choices)."""
    lr = spec.search.learning_rate
    if lr.choices is not None:
        return sorted(float(v) for v in lr.choices)
    assert lr.low is not None and lr.high is not None
    return [lr.low, math.sqrt(lr.low * lr.high), lr.high]


def grid_spec(spec: StudySpec, ranks: list[int] | None = None, batches: list[int] | None = None) -> StudySpec:
    data = spec.model_dump(mode="json")
    data["search"]["learning_rate"] = {"choices": grid_lrs(spec)}
    if ranks:
        data["search"]["rank"] = {"choices": ranks}
    if batches:
        data["search"]["batch_size"] = {"choices": batches}
    data["sampler"] = {"name": "grid"}
    data["pruner"] = {"name": "none"}
    data["budget"].update(confirm_top=0, keep_adapters=0)  # the short trials alone: this bench's measure
    return parse_spec(data, "grid spec")


def strategy_spec(spec: StudySpec, strategy: str, seed: int, grid_of: StudySpec) -> StudySpec:
    """The spec a strategy's study runs: the spec's task with the *default* sampler/pruner
    settings of that name (what a user gets without tuning the tuner), seeded by ``seed``."""
    sampler, pruner = STRATEGIES[strategy]
    base = grid_of if strategy == "grid" else spec
    data = base.model_dump(mode="json")
    data["sampler"] = SamplerSpec(name=sampler).model_dump(mode="json")  # type: ignore[arg-type]
    data["pruner"] = PrunerSpec(name=pruner).model_dump(mode="json")  # type: ignore[arg-type]
    data["seed"] = seed
    data["budget"].update(confirm_top=0, keep_adapters=0)  # the search alone, read at each trial
    return parse_spec(data, f"{strategy} spec")


class Tracker:
    """Wraps the worker: counts compute, keeps the best, and stops the study by setting the
    driver's interrupt event once the race is decided (the driver's ``trial_fn`` seam)."""

    def __init__(self, run: TrialFn, train_seed: int, on_trial: Any, should_stop: Any = None) -> None:
        self.run, self.train_seed, self.on_trial, self.should_stop = run, train_seed, on_trial, should_stop
        self.compute = 0
        self.n = 0
        self.best = math.inf
        self.wall = 0.0
        self.decided = False  # the race stopped the study (not a Ctrl-C or a kill)

    def __call__(self, config: TrialConfig, report: ReportFn, interrupt: threading.Event | None) -> TrialResult:
        config = dataclasses.replace(config, seed=self.train_seed)
        t0 = time.perf_counter()
        result = self.run(config, report, interrupt)
        # a looked-up grid run (--grid-from-table) counts the wall time it took when it ran
        self.wall += max(time.perf_counter() - t0, result.wall_time_s)
        self.compute += result.examples_seen
        self.n += 1
        if result.state.value == "complete" and result.score is not None:
            self.best = min(self.best, result.score)
        self.on_trial(config, result, self)
        if self.should_stop is not None and interrupt is not None and self.should_stop(self):
            self.decided = True
            interrupt.set()  # the driver's loop ends after this trial is stored
        return result


def _worker() -> TrialFn:
    warnings.filterwarnings("ignore")
    from autotune.study.driver import default_trial_fn

    return default_trial_fn()


def _append(path: Path, fields: list[str], row: dict[str, Any]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow(row)


def _key(r: dict[str, str]) -> tuple[int, int, str]:
    return int(r["rank"]), int(r["batch_size"]), f"{float(r['learning_rate']):.6g}"


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def cmd_grid(args: argparse.Namespace) -> None:
    from autotune.search.space import grid_size
    from autotune.study.driver import run_study
    from autotune.worker.run_trial import run_trial

    spec = load_spec(args.spec)
    gspec = grid_spec(spec, args.ranks, args.batches)
    out = Path(args.out or RESULTS / f"search_grid_{_stem(spec)}.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    args.resume = args.resume or args.only_reseed
    done = {_key(r): r for r in _read(out) if int(r["train_seed"]) == spec.seed} if args.resume else {}
    if not args.resume:
        out.unlink(missing_ok=True)
    rows: list[dict[str, Any]] = list(done.values())

    def on_trial(c: TrialConfig, r: TrialResult, _t: Tracker) -> None:
        row = {
            "rank": c.rank, "batch_size": c.batch_size, "learning_rate": f"{c.learning_rate:.6g}",
            "train_seed": c.seed, "state": r.state.value, "score": _fmt(r.score), "val_loss": _fmt(r.val_loss),
            "train_loss": _fmt(r.train_loss), "accuracy": _fmt(r.accuracy), "examples_seen": r.examples_seen,
            "wall_time_s": f"{r.wall_time_s:.2f}", "train_time_s": f"{r.train_time_s:.2f}",
            "curve": " ".join(f"{p.examples_seen}:{p.score:.5g}" for p in r.curve),
        }  # fmt: skip
        if (c.rank, c.batch_size, f"{c.learning_rate:.6g}") in done and c.seed == spec.seed:
            return  # --resume: already in the table
        rows.append(row)
        _append(out, GRID_FIELDS, row)
        print(
            f"grid {len(rows)}: r={c.rank} b={c.batch_size} lr={c.learning_rate:.3g} score={_fmt(r.score)}", flush=True
        )

    worker = _worker()

    def run_or_reuse(c: TrialConfig, report: ReportFn, interrupt: threading.Event | None) -> TrialResult:
        row = done.get((c.rank, c.batch_size, f"{c.learning_rate:.6g}"))
        if row is None:
            return worker(c, report, interrupt)
        # --resume: a config the table already holds is not trained again
        score, seen = float(row["score"]), int(row["examples_seen"])
        return TrialResult(state=TrialState.COMPLETE, score=score, examples_seen=seen)

    tracker = Tracker(run_or_reuse, spec.seed, on_trial)
    t0 = time.perf_counter()
    if not args.only_reseed:
        with tempfile.TemporaryDirectory() as tmp:
            summary = run_study(
                gspec, f"sqlite:///{tmp}/grid.db", n_trials=grid_size(gspec), show_progress=False, trial_fn=tracker
            )
        if summary.interrupted:
            sys.exit("grid interrupted: the table is incomplete")
    total = time.perf_counter() - t0
    ranked = sorted((r for r in rows if r["score"]), key=lambda r: float(r["score"]))
    best = ranked[0]
    print(f"grid: {len(rows)} configs, {tracker.compute} examples, {total:.0f} s; best {best}")
    if args.reseed and ranked:
        picks = [ranked[0], ranked[len(ranked) // 2], ranked[-1]][: args.reseed]
        spread = []
        for row in picks:
            c = dataclasses.replace(_config_of(gspec, row), seed=spec.seed + args.reseed_offset)
            r = run_trial(c, lambda _s, _v: False, None)
            assert r.score is not None
            rel = abs(r.score - float(row["score"])) / float(row["score"])
            spread.append(rel)
            on_trial(c, r, tracker)
            print(f"reseed r={c.rank} b={c.batch_size} lr={c.learning_rate:.3g}: seed {spec.seed} "
                  f"{float(row['score']):.4f} vs seed {c.seed} {r.score:.4f} ({100 * rel:.2f}%)")  # fmt: skip
        print(f"seed_spread_median={100 * statistics.median(spread):.2f}% max={100 * max(spread):.2f}%")


def _config_of(spec: StudySpec, row: dict[str, Any]) -> TrialConfig:
    from autotune.trial import trial_config

    params = {
        "rank": int(row["rank"]),
        "batch_size": int(row["batch_size"]),
        "learning_rate": float(row["learning_rate"]),
    }
    return trial_config(spec, params)


def read_grid(path: Path, train_seed: int) -> list[dict[str, Any]]:
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if int(r["train_seed"]) == train_seed]
    if not rows:
        sys.exit(f"{path}: no grid rows for train seed {train_seed}: run `grid` first")
    return rows


def grid_facts(rows: list[dict[str, Any]]) -> tuple[float, int]:
    best = min(float(r["score"]) for r in rows if r["score"])
    return best, sum(int(r["examples_seen"]) for r in rows)


def cmd_race(args: argparse.Namespace) -> None:
    from autotune.study.driver import run_study

    spec = load_spec(args.spec)
    gspec = grid_spec(spec, args.ranks, args.batches)
    grid_csv = Path(args.grid_csv or RESULTS / f"search_grid_{_stem(spec)}.csv")
    grid_rows = read_grid(grid_csv, spec.seed)
    from autotune.search.space import grid_size

    if len({_key(r) for r in grid_rows}) < grid_size(gspec):
        sys.exit(f"{grid_csv}: {len(grid_rows)} of {grid_size(gspec)} grid configs: finish `grid --resume` first")
    grid_best, grid_compute = grid_facts(grid_rows)
    n_fixed = spec.n_trials
    run = _worker() if args.strategies else None
    cache = args.cache_dir or os.environ.get("AUTOTUNE_CACHE_DIR")
    for strategy in args.strategies:
        out = _race_csv(args, spec, strategy)
        out.parent.mkdir(parents=True, exist_ok=True)
        done = {int(r["seed"]) for r in _read(out) if r["trial"] == "end"}
        for seed in args.only_seeds if args.only_seeds is not None else range(args.seeds):
            if seed in done:
                continue
            sdata = strategy_spec(spec, strategy, seed, gspec).model_dump(mode="json")
            _apply_variant(sdata, args)
            sspec = parse_spec(sdata, "race spec")

            def on_trial(
                c: TrialConfig, r: TrialResult, t: Tracker, strategy: str = strategy, seed: int = seed, out: Path = out
            ) -> None:
                _append(out, RACE_FIELDS, {
                    "strategy": strategy, "seed": seed, "trial": t.n, "rank": c.rank, "batch_size": c.batch_size,
                    "learning_rate": f"{c.learning_rate:.6g}", "state": r.state.value, "score": _fmt(r.score),
                    "examples_seen": r.examples_seen, "compute": t.compute, "best": _fmt(t.best),
                    "wall_s": f"{t.wall:.2f}",
                })  # fmt: skip

            def stop(t: Tracker) -> bool:
                reached = t.best <= grid_best * (1 + WITHIN)
                cap = grid_compute * args.max_share
                return (reached and t.n >= n_fixed) or t.compute >= cap or t.n >= args.max_trials

            assert run is not None
            trial_run = _lookup(grid_rows) if strategy == "grid" and args.grid_from_table else run
            tracker = Tracker(trial_run, spec.seed, on_trial, stop)
            with tempfile.TemporaryDirectory() as tmp:
                if args.warm_from_race:
                    _seed_priors(f"sqlite:///{tmp}/race.db", sspec, _race_priors(args, seed))
                summary = run_study(
                    sspec, f"sqlite:///{tmp}/race.db", n_trials=args.max_trials, show_progress=False,
                    cache_dir=cache, trial_fn=tracker, sampler=_tpe_override(args, sspec),
                )  # fmt: skip
                if summary.interrupted and not tracker.decided:  # Ctrl-C or kill: not a finished seed
                    sys.exit(f"{strategy} seed {seed} interrupted after {tracker.n} trials; its rows stay, unfinished")
                if args.check_storage:
                    _check_storage(f"sqlite:///{tmp}/race.db", sspec.name, tracker)
            _append(out, RACE_FIELDS, {"strategy": strategy, "seed": seed, "trial": "end", "compute": tracker.compute,
                                       "best": _fmt(tracker.best), "wall_s": f"{tracker.wall:.2f}"})  # fmt: skip
            print(f"{strategy} seed {seed}: {tracker.n} trials, {tracker.compute} examples, best {tracker.best:.4f}",
                  flush=True)  # fmt: skip
    summarize(args, spec, grid_best, grid_compute, n_fixed)


def _race_priors(args: argparse.Namespace, seed: int) -> list[dict[str, Any]]:
    """``--warm-from-race CSV``: the complete trials among the first ``n_trials`` of another seed's
    real race (an earlier fixed study with another sampler seed, on the same task and budget)."""
    rows = _read(Path(args.warm_from_race))
    seeds = sorted({int(r["seed"]) for r in rows})
    src = seeds[((seeds.index(seed) if seed in seeds else seed) + args.warm_offset) % len(seeds)]
    n_fixed = load_spec(args.spec).n_trials
    first = [r for r in rows if int(r["seed"]) == src and r["trial"] != "end" and int(r["trial"]) <= n_fixed]
    return [r for r in first if r["state"] == "complete"]


def _seed_priors(url: str, sspec: StudySpec, rows: list[dict[str, Any]]) -> None:
    """What ``autotune run --warm-start`` does (autotune.study.warm_start), from race rows."""
    from autotune.search.priors import prior_trial
    from autotune.search.space import distributions
    from autotune.storage import Store
    from autotune.study.setup import open_study

    dists = distributions(sspec)
    store = Store.open(url, create=True)
    try:
        open_study(sspec, store, sspec.name).add_trials([
            prior_trial(
                {"rank": int(r["rank"]), "batch_size": int(r["batch_size"]),
                 "learning_rate": float(r["learning_rate"])},
                float(r["score"]), dists, f"race#{r['trial']}",
            )
            for r in rows
        ])  # fmt: skip
    finally:
        store.close()


def _tpe_override(args: argparse.Namespace, spec: StudySpec) -> SamplerFactory | None:
    """``--legacy-startup`` / ``--tpe V``: the sampler raced in place of the default ``tpe`` (a
    strategy with another sampler keeps its own), through ``run_study(sampler=...)``."""
    if spec.sampler.name != "tpe":
        return None
    if args.legacy_startup:  # the pre-issue-10 TPE, for a before/after race in one code base
        return _legacy_tpe
    return _tpe_variant(args.tpe) if args.tpe else None


def _lookup(grid_rows: list[dict[str, Any]]) -> TrialFn:
    """The ``grid`` strategy without training again: its configs are exactly the grid's, at the
    same training seed, so each trial's result is the committed grid run's (score, examples).
    The order still comes from a real study (GridSampler, seeded, through the driver)."""
    table = {_key(r): r for r in grid_rows}

    def run(config: TrialConfig, report: ReportFn, interrupt: threading.Event | None) -> TrialResult:
        row = table[(config.rank, config.batch_size, f"{config.learning_rate:.6g}")]
        return TrialResult(
            state=TrialState.COMPLETE, score=float(row["score"]), val_loss=float(row["val_loss"]),
            examples_seen=int(row["examples_seen"]), wall_time_s=float(row["wall_time_s"]),
        )  # fmt: skip

    return run


def _check_storage(url: str, name: str, tracker: Tracker) -> None:
    """The compute the tracker counted is what the trials table says was trained."""
    from autotune.storage import Store

    store = Store.open(url, create=False)
    try:
        stored = sum(int(r["examples_seen"] or 0) for r in store.trials(name))
    finally:
        store.close()
    if stored != tracker.compute:
        sys.exit(f"compute mismatch: tracker {tracker.compute}, trials table {stored}")
    print(f"storage check: {stored} examples in the trials table")


def _race_csv(args: argparse.Namespace, spec: StudySpec, strategy: str) -> Path:
    return Path(args.out_dir or RESULTS) / f"race_{_stem(spec)}{args.tag}_{strategy}.csv"


def _read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def seed_outcome(rows: list[dict[str, str]], grid_best: float, grid_compute: int, n_fixed: int) -> dict[str, Any]:
    """From one seed's trial rows: compute share until within 1% (1.0 if never within the
    grid's compute), wall time until then, and the best score after the first n_fixed trials."""
    share, wall, reached = 1.0, None, False
    fixed = math.inf
    for r in rows:
        best = float(r["best"]) if r["best"] else math.inf
        if int(r["trial"]) <= n_fixed:
            fixed = best
        if not reached and best <= grid_best * (1 + WITHIN) and int(r["compute"]) <= grid_compute:
            share, wall, reached = int(r["compute"]) / grid_compute, float(r["wall_s"]), True
    compute = int(rows[-1]["compute"]) if rows else 0
    return {"share": share, "wall": wall, "reached": reached, "fixed": fixed, "trials": len(rows), "compute": compute}


def summarize(args: argparse.Namespace, spec: StudySpec, grid_best: float, grid_compute: int, n_fixed: int) -> None:
    print(f"grid best {grid_best:.4f}, grid compute {grid_compute} examples; target <= {grid_best * (1 + WITHIN):.4f}")
    shares: dict[str, str] = {}
    reached_tpe = "0/0"
    for strategy in STRATEGIES:
        rows = _read(_race_csv(args, spec, strategy))
        if not rows and args.tag:  # a variant raced one strategy: the others are the plain baselines
            rows = _read(Path(args.out_dir or RESULTS) / f"race_{_stem(spec)}_{strategy}.csv")
            if rows:
                print(f"{strategy}: no '{args.tag}' run, using the untagged one")
        ended = {int(r["seed"]) for r in rows if r["trial"] == "end"}
        # a seed with trials but no end row was stopped (killed for time, or still running): it
        # counts as what it reached, else 1.0, and is marked, so a stopped seed is never dropped
        seeds = sorted({int(r["seed"]) for r in rows})
        if not seeds:
            shares[strategy] = "nan"
            continue
        outs = [
            seed_outcome(
                [r for r in rows if int(r["seed"]) == s and r["trial"] != "end"], grid_best, grid_compute, n_fixed
            )
            for s in seeds
        ]
        med = statistics.median(o["share"] for o in outs)
        k = sum(o["reached"] for o in outs)
        fixed = statistics.median(o["fixed"] for o in outs)
        walls = [o["wall"] for o in outs if o["wall"] is not None]
        listed = " ".join(
            f"{o['share']:.3f}" + ("" if sd in ended else f"*(stopped at {o['compute'] / grid_compute:.2f})")
            for sd, o in zip(seeds, outs, strict=True)
        )
        print(
            f"{strategy}: shares {listed} (1.0 = never within 1%; * = stopped unfinished), "
            f"reached {k}/{len(outs)}, median wall to reach {statistics.median(walls) if walls else math.nan:.0f} s; "
            f"fixed {n_fixed}-trial study: median best {fixed:.4f} vs grid {grid_best:.4f} "
            f"({100 * (fixed / grid_best - 1):+.1f}%)"
        )
        shares[strategy] = f"{med:.3f}"
        if strategy == "tpe_asha":
            reached_tpe = f"{k}/{len(outs)}"
    print(
        f"tpe_asha_share={shares['tpe_asha']} random_asha_share={shares['random_asha']} "
        f"random_share={shares['random']} grid_share={shares['grid']} reached={reached_tpe}"
    )


def _legacy_tpe(spec: StudySpec, seed: int | None = None) -> Any:
    """The TPE default before issue 10: Optuna's 10 uniform start-up trials, whatever n_trials."""
    import optuna

    return optuna.samplers.TPESampler(seed=spec.seed if seed is None else seed, multivariate=True)


def _tpe_variant(name: str) -> Any:
    """A sampler to race in place of the default ``tpe`` (same Sobol start-up, only the model after
    it differs): the candidates for issue 10's "make it win"."""
    import optuna

    from autotune.search.space import distributions
    from autotune.search.space_filling import SpaceFillingStartup, startup_trials

    def make(spec: StudySpec, seed: int) -> Any:
        n = startup_trials(spec)
        kw: dict[str, Any] = {"seed": seed, "multivariate": True, "constant_liar": True, "n_startup_trials": n}
        if name == "plain":  # the default before the edge probe: Sobol start-up, then TPE
            inner: Any = optuna.samplers.TPESampler(**kw)
        elif name == "gp":  # GP counts only complete trials toward its start-up: Sobol covers the start
            inner = optuna.samplers.GPSampler(seed=seed, n_startup_trials=1)
        elif name == "univariate":
            inner = optuna.samplers.TPESampler(**{**kw, "multivariate": False})
        elif name == "endpoints":
            inner = optuna.samplers.TPESampler(**kw, consider_endpoints=True)
        elif name == "prior_half":
            inner = optuna.samplers.TPESampler(**kw, prior_weight=0.5)
        elif name == "ei64":
            inner = optuna.samplers.TPESampler(**kw, n_ei_candidates=64)
        elif name == "gamma2":  # at least two good trials, so the good density is not one point
            inner = optuna.samplers.TPESampler(**kw, gamma=lambda k: max(2, min(math.ceil(0.1 * k), 25)))
        elif name.startswith("probe"):
            extras: dict[str, dict[str, Any]] = {
                "probe": {}, "probe_prior2": {"prior_weight": 2.0}, "probe_ei64": {"n_ei_candidates": 64},
                "probe_univariate": {"multivariate": False},
            }  # fmt: skip
            extra = extras[name]
            tpe = optuna.samplers.TPESampler(**{**kw, **extra})
            # the edge probe alone: the default before the local sweep (neighbours=True)
            return SpaceFillingStartup(tpe, distributions(spec), n, spec.seed, edge_probe=True)
        else:
            raise SystemExit(f"unknown --tpe variant {name!r}")
        return SpaceFillingStartup(inner, distributions(spec), n, spec.seed)

    return make


TPE_VARIANTS = [
    "plain", "probe", "probe_prior2", "probe_ei64", "probe_univariate", "gp", "univariate", "endpoints", "prior_half",
    "ei64", "gamma2",
]  # fmt: skip


def _apply_variant(data: dict[str, Any], args: argparse.Namespace) -> None:
    if args.min_resource is not None and data["pruner"]["name"] != "none":
        data["pruner"]["min_resource"] = args.min_resource
    if args.reduction_factor is not None and data["pruner"]["name"] != "none":
        data["pruner"]["reduction_factor"] = args.reduction_factor


def replay_one(
    args: argparse.Namespace, sspec: StudySpec, table: dict[tuple[int, int, float], dict[str, Any]],
    grid_best: float, grid_compute: int, n_fixed: int, priors: list[Any] | None = None,
    keep: list[Any] | None = None, limit: int | None = None, at_eval: int | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """One study over the grid table: the real sampler and pruner, trial results looked up.
    ``priors``: finished trials added first (a warm start); ``keep`` collects this study's."""
    import optuna

    from autotune.search.samplers import make_pruner, make_sampler
    from autotune.search.space import suggest

    sampler = make_sampler(sspec, factory=_tpe_override(args, sspec))  # --legacy-startup / --tpe
    study = optuna.create_study(sampler=sampler, pruner=make_pruner(sspec), direction="minimize")
    if priors:
        study.add_trials(priors)  # what autotune.study.warm_start does with a stored study's trials
    state = {"compute": 0, "best": math.inf}
    trace: list[dict[str, Any]] = []

    def objective(trial: optuna.Trial) -> float:
        p = suggest(trial, sspec)
        row = _row_at(table, int(p["rank"]), int(p["batch_size"]), float(p["learning_rate"]))
        if at_eval is not None:  # a study with a smaller budget: the curve's score at that point
            ex, score = row["curve"].split()[at_eval - 1].split(":")
            state["compute"] += int(ex)
            return float(score)
        for i, point in enumerate(row["curve"].split(), start=1):
            ex, score = point.split(":")
            trial.report(float(score), i)
            if trial.should_prune():
                state["compute"] += int(ex)
                raise optuna.TrialPruned()
        state["compute"] += int(row["examples_seen"])
        state["best"] = min(state["best"], float(row["score"]))
        return float(row["score"])

    for n in range(1, (limit or args.max_trials) + 1):
        study.optimize(objective, n_trials=1)
        trace.append({"trial": str(n), "compute": str(state["compute"]), "best": str(state["best"]), "wall_s": "0"})
        reached = state["best"] <= grid_best * (1 + WITHIN)
        if (reached and n >= n_fixed) or state["compute"] >= grid_compute:
            break
    if keep is not None:  # as autotune.study.warm_start.priors builds them: params and score, no pruner state
        from autotune.search.priors import prior_trial

        keep.extend(
            prior_trial(t.params, float(t.value), t.distributions, f"replay#{t.number}")  # type: ignore[arg-type]
            for t in study.trials
            if t.state == optuna.trial.TrialState.COMPLETE
        )
    return trace


def _row_at(table: dict[tuple[int, int, float], dict[str, Any]], rank: int, batch: int, lr: float) -> dict[str, Any]:
    """The grid's run at (rank, batch, lr); an lr between the grid's values (``--surrogate``) gets
    every evaluation's score interpolated linearly in log lr between its two grid neighbours."""
    if (rank, batch, lr) in table:
        return table[(rank, batch, lr)]
    lrs = sorted(k[2] for k in table if k[:2] == (rank, batch))
    lo = max([x for x in lrs if x <= lr], default=lrs[0])
    hi = min([x for x in lrs if x >= lr], default=lrs[-1])
    a, b = table[(rank, batch, lo)], table[(rank, batch, hi)]
    w = 0.0 if hi == lo else (math.log(lr) - math.log(lo)) / (math.log(hi) - math.log(lo))
    points = []
    for pa, pb in zip(a["curve"].split(), b["curve"].split(), strict=True):
        ex, sa = pa.split(":")
        points.append(f"{ex}:{(1 - w) * float(sa) + w * float(pb.split(':')[1]):.5f}")
    return {**a, "learning_rate": lr, "curve": " ".join(points), "score": points[-1].split(":")[1]}


def _rung_signal(rows: list[dict[str, Any]]) -> None:
    """How well each evaluation ranks the configs as their final scores do (Spearman), and how
    far the scores have moved from the first evaluation: a rung where nothing moved is noise."""
    from scipy.stats import spearmanr

    curves = [[float(p.split(":")[1]) for p in r["curve"].split()] for r in rows]
    final = [float(r["score"]) for r in rows]
    n = min(len(c) for c in curves)
    for k in range(n):
        at = [c[k] for c in curves]
        rho = spearmanr(at, final).statistic
        keep = sorted(range(len(at)), key=lambda i: at[i])[: max(1, len(at) // 3)]
        best_kept = min(final[i] for i in keep) <= min(final) * (1 + WITHIN)
        print(
            f"eval {k + 1}/{n}: spearman vs final {rho:.2f}; score spread {min(at):.4f}..{max(at):.4f}; "
            f"top third here keeps a config within 1% of the best: {best_kept}"
        )


def cmd_replay(args: argparse.Namespace) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    spec = load_spec(args.spec)
    rows = read_grid(Path(args.grid_csv or RESULTS / f"search_grid_{_stem(spec)}.csv"), spec.seed)
    grid_best, grid_compute = grid_facts(rows)
    table = {(int(r["rank"]), int(r["batch_size"]), float(r["learning_rate"])): r for r in rows}
    n_full = len({k[0] for k in table}) * len({k[1] for k in table}) * len({k[2] for k in table})
    if len(table) < n_full:
        sys.exit(f"the grid table holds {len(table)} of {n_full} configs: a replay needs all of them")
    data = spec.model_dump(mode="json")
    data["budget"].update(confirm_top=0, keep_adapters=0)
    if not args.surrogate:
        data["search"]["learning_rate"] = {"choices": sorted({k[2] for k in table})}
    data["search"]["rank"] = {"choices": sorted({k[0] for k in table})}
    data["search"]["batch_size"] = {"choices": sorted({k[1] for k in table})}
    on_grid = parse_spec(data, "replay spec")
    near = sum(1 for r in rows if float(r["score"]) <= grid_best * (1 + WITHIN))
    variant = "legacy TPE start-up" if args.legacy_startup else (args.tpe or "current")
    lr_how = (
        "SURROGATE: learning rate continuous, scores interpolated in log lr between the grid's values"
        if args.surrogate
        else f"learning rate restricted to the grid's {len(grid_lrs(spec))} values"
    )
    print(
        f"REPLAY over the grid table ({len(rows)} real runs; {lr_how}; {args.seeds} seeds): {near} configs within 1% "
        f"of the best {grid_best:.4f}; variant: {variant}"
        f", min_resource {args.min_resource or 'spec default'}"
        + (f"; warm-started from a {spec.n_trials}-trial study with seed +{args.warm_from}" if args.warm_from else "")
        + (f" whose budget ended at evaluation {args.warm_at_eval}" if args.warm_at_eval else "")
    )
    _rung_signal(rows)
    for strategy in args.strategies:
        outs = []
        for seed in range(args.seeds):
            sdata = strategy_spec(on_grid, strategy, seed, on_grid).model_dump(mode="json")
            sdata["n_trials"] = spec.n_trials
            _apply_variant(sdata, args)
            rspec = parse_spec(sdata, "replay")
            priors: list[Any] = []
            if args.warm_from is not None:  # an earlier fixed study (another seed) whose trials seed this one
                earlier = parse_spec({**sdata, "seed": seed + args.warm_from}, "earlier")
                replay_one(
                    args, earlier, table, -math.inf, 10**12, spec.n_trials, keep=priors, limit=spec.n_trials,
                    at_eval=args.warm_at_eval,
                )  # fmt: skip
            trace = replay_one(args, rspec, table, grid_best, grid_compute, spec.n_trials, priors=priors)
            outs.append(seed_outcome(trace, grid_best, grid_compute, spec.n_trials))
        shares = [o["share"] for o in outs]
        k = sum(o["reached"] for o in outs)
        fixed = statistics.median(o["fixed"] for o in outs)
        print(
            f"replay {strategy}: median share {statistics.median(shares):.3f} mean {statistics.mean(shares):.3f} "
            f"reached {k}/{len(outs)}; fixed {spec.n_trials}-trial study median best {fixed:.4f} "
            f"({100 * (fixed / grid_best - 1):+.1f}% vs grid)"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("grid", "race", "replay"):
        p = sub.add_parser(name)
        p.add_argument("--spec", default=str(REPO / "studies" / "quickstart.yaml"))
        p.add_argument("--grid-csv", default=None, help="the grid table (default bench/results/search_grid_NAME.csv)")
        p.add_argument("--ranks", type=int, nargs="+", default=None, help="grid ranks (default: the spec's)")
        p.add_argument("--batches", type=int, nargs="+", default=None, help="grid batch sizes (default: the spec's)")
        p.add_argument("--seeds", type=int, default=5 if name != "replay" else 200)
        p.add_argument("--strategies", nargs="*", default=list(STRATEGIES), choices=list(STRATEGIES))
        p.add_argument("--max-trials", type=int, default=200, help="cap on trials per seed")
        p.add_argument("--min-resource", type=int, default=None, help="variant: ASHA's first rung (evaluation index)")
        p.add_argument("--reduction-factor", type=int, default=None, help="variant: ASHA's reduction factor")
        p.add_argument("--legacy-startup", action="store_true", help="variant: TPE as before issue 10")
        p.add_argument("--tpe", choices=TPE_VARIANTS, default=None, help="variant: another model after the start-up")
        p.add_argument(
            "--warm-from", type=int, default=None, help="replay: warm-start from a fixed study with seed + this"
        )
        p.add_argument(
            "--warm-at-eval", type=int, default=None, help="replay: that earlier study's budget ends at this evaluation"
        )
    sub.choices["replay"].add_argument(
        "--surrogate", action="store_true",
        help="keep the spec's continuous lr range; score = the grid's curves interpolated in log lr",
    )  # fmt: skip
    g = sub.choices["grid"]
    g.add_argument("--out", default=None)
    g.add_argument("--reseed", type=int, default=3, help="configs to re-run with another training seed")
    g.add_argument("--reseed-offset", type=int, default=1)
    g.add_argument("--resume", action="store_true", help="keep the rows already in --out; run only the rest")
    g.add_argument("--only-reseed", action="store_true", help="no grid run: re-seed configs of the rows in --out")
    r = sub.choices["race"]
    r.add_argument("--out-dir", default=None)
    r.add_argument("--tag", default="", help="suffix of the race CSVs (a variant's name)")
    r.add_argument("--cache-dir", default=None)
    r.add_argument(
        "--warm-from-race", default=None,
        help="warm-start each seed's study from the complete trials among the first n_trials of another seed "
        "in this race CSV (a real earlier study with another sampler seed)",
    )  # fmt: skip
    r.add_argument("--warm-offset", type=int, default=1, help="--warm-from-race: take seed s + this (mod the seeds)")
    r.add_argument(
        "--max-share", type=float, default=1.0,
        help="stop a seed that has not got there after this share of the grid's compute (it counts as 1.0: "
        "a median below the cap is the same as without it)",
    )  # fmt: skip
    r.add_argument(
        "--only-seeds", type=int, nargs="+", default=None,
        help="run just these seeds (split one strategy's seeds over processes; the summary still reads --seeds)",
    )  # fmt: skip
    r.add_argument("--check-storage", action="store_true", help="cross-check compute against the trials table")
    r.add_argument(
        "--grid-from-table", action="store_true",
        help="grid strategy: take each config's result from the committed grid runs instead of training again",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.cmd == "grid" and args.grid_csv and not args.out:
        args.out = args.grid_csv
    {"grid": cmd_grid, "race": cmd_race, "replay": cmd_replay}[args.cmd](args)


if __name__ == "__main__":
    main()
