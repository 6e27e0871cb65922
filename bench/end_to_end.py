"""What a user gets: the adapter a search recommends, trained at the target budget, with fresh seeds.

A search is judged by the config it recommends, re-trained at the budget the user will really use,
against the best config measured the same way (its regret), at equal compute (issue 20):

1. ``grid``: the design this project grew from: every rank x batch x 3 learning rates (the range's
   ends and log-middle) trained once at the target budget (``budget.target_examples``, else one
   pass over the training split), training seed 0; its pick is the lowest score.
2. ``oracle``: the grid's top 8 trained with training seeds 1 and 2 as well; the oracle is the
   config with the best 3-seed mean, and each config's seed spread, (max - min) / mean, is kept.
3. ``race``: each strategy's study, 5 study seeds, run until it has spent 40% of the grid's compute
   (training examples, pruned work included). The study seed moves the sampler alone: every study
   trains with the task's training seed and is scored on the task's validation split. Strategies:
   ``default`` (autotune's default search: tpe + asha), ``tpe_asha`` (TPE after the same Sobol
   start-up, without the bound probe and sweep), ``random_asha``; ``grid_random`` (the grid in a
   random order) is read from the grid's own table, with no training. ``warm`` (on request): an
   earlier study (another sampler seed, half the short budget) warm-starts the default study, and
   its examples count toward the same compute. ``rungs`` (on request): multi-fidelity to the
   target, the default search with every trial's full budget at the target (ASHA's rungs end
   there, evaluated as often per example as the short trials); it recommends its best complete
   trial, trained at the target already.
4. ``confirm``: at 10%, 20% and 40% of the grid's compute, each study's recommendation (its best
   complete trial so far), the grid's own pick and the oracle are trained at the target budget
   with the fresh training seeds 101, 102, 103 (``--fresh-seeds N``: 101 to 100 + N); a config
   is trained once per seed, whatever asks. ``--part i/n`` lists every run the summary asks for and
   trains the i-th of n shares of those missing, so that n processes train none twice.
5. ``summary``: regret = a recommendation's mean score over the fresh seeds / the oracle's mean
   over the same seeds - 1 (accuracy: the oracle's mean minus its, in points); noise = the median
   seed spread of the grid's top 8. Also what these seeds can resolve: ``regret_se``, one
   regret's standard error (the fresh seeds' pooled spread), and ``paired@0.2``, the default
   against each other strategy and the grid's pick on the same study seeds (seeds better and
   worse, an exact sign test). Writes bench/results/e2e_<task>.json (``e2e_<task>_fresh<N>.json``
   with ``--fresh-seeds N``, from the same runs table) and ends with
   ``e2e task=T default_regret@0.2=X random_asha_regret@0.2=Y grid_pick_regret=Z noise=N reached=K/5``
   (median regrets; K: the default's seeds within the noise at 0.2).

Every stage appends to CSVs in bench/results/ (e2e_<task>_runs.csv, e2e_<task>_race.csv) and
resumes where it stopped: a run in the table is not trained again, a study seed without its end
row runs again from the start. Run: python bench/end_to_end.py --spec studies/smoke.yaml all
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import re
import statistics
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from autotune.inputs.check import check_inputs  # noqa: E402
from autotune.spec import PrunerSpec, SamplerSpec, StudySpec, load_spec, parse_spec  # noqa: E402
from autotune.trial import ReportFn, TrialConfig, TrialFn, TrialResult  # noqa: E402
from bench import e2e_boot  # noqa: E402

RESULTS = REPO / "bench" / "results"
STRATEGIES = ("default", "tpe_asha", "random_asha", "grid_random", "warm", "rungs")
DEFAULT_STRATEGIES = STRATEGIES[:4]  # ``warm`` and ``rungs`` on request
READINGS = (0.1, 0.2, 0.4)
# autotune's default: the search, then its best config and its hedge re-trained once at the target
# budget (budget.confirm_top: 2, confirm_seeds: 1, confirm_hedge: true); before it, ``confirm2x1``
# (the 2 best configs); ``default`` here is the search alone
SHIPPED = "hedge2x1"
FRESH_SEEDS = (101, 102, 103)
ORACLE_TOP = 8
ORACLE_SEEDS = (1, 2)
RUN_FIELDS = ["kind", "rank", "batch_size", "learning_rate", "train_seed", "state", "score", "val_loss", "accuracy",
              "examples", "wall_s", "params"]  # fmt: skip
RACE_FIELDS = ["strategy", "seed", "trial", "rank", "batch_size", "learning_rate", "state", "score", "examples_seen",
               "compute", "params"]  # fmt: skip
# rank, batch, lr as written, and any other searched parameter as sorted JSON ("" when the spec
# searches only those three, and in tables written before the column existed): a config is all of it
Key = tuple[int, int, str, str]


def _key(rank: Any, batch: Any, lr: Any, extra: str | None = "") -> Key:
    return int(rank), int(batch), f"{float(lr):.6g}", extra or ""


def config_name(key: Key) -> str:
    """A config's label in the summaries' ``pairs`` and ``fresh_scores``: rank/batch/lr[/params]."""
    return "/".join(str(x) for x in key if x != "")


def _row_key(r: dict[str, str]) -> Key:
    return _key(r["rank"], r["batch_size"], r["learning_rate"], r.get("params"))


def _extra(spec: StudySpec, c: TrialConfig) -> str:
    """The searched parameters beyond rank, batch and lr, read back from the trial's config."""
    from autotune.spec import searched_params

    values = {
        "lora_alpha_ratio": c.lora_alpha / c.rank,
        "lora_dropout": c.lora_dropout,
        "use_dora": c.use_dora,
        "loraplus_lr_ratio": c.loraplus_lr_ratio or 1.0,
        "target_modules": c.model.target_modules,
    }
    extra = {n: values[n] for n, _ in searched_params(spec) if n not in ("rank", "batch_size", "learning_rate")}
    return json.dumps(extra, sort_keys=True) if extra else ""


def _read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open() as f:
        return [{k: v for k, v in r.items() if k is not None} for r in csv.DictReader(f)]


def _upgrade(path: Path, fields: list[str]) -> None:
    """A table written before a column existed gets the current header (the new column empty)."""
    if not path.exists():
        return
    with path.open() as f:
        header = next(csv.reader(f), [])
    if header == fields:
        return
    rows = _read(path)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows({k: r.get(k, "") for k in fields} for r in rows)


def _append(path: Path, fields: list[str], row: dict[str, Any]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow(row)


def _fmt(v: float | None) -> str:
    return "" if v is None or not math.isfinite(v) else f"{v:.6g}"


def grid_configs(spec: StudySpec) -> list[Key]:
    """Every searched rank x batch x (low, log-middle, high) learning rate of the spec."""
    s = spec.search
    assert s.rank.choices is not None and s.batch_size.choices is not None, "the grid needs rank and batch choices"
    lr = s.learning_rate
    lrs = sorted(lr.choices) if lr.choices is not None else [lr.low, math.sqrt(lr.low * lr.high), lr.high]  # type: ignore[operator]
    return [_key(r, b, x) for r in s.rank.choices for b in s.batch_size.choices for x in lrs]


class Bench:
    """The task's target budget and every run at it, from the runs table (trained when missing)."""

    def __init__(
        self, spec: StudySpec, out_dir: Path, cache_dir: str | None, fresh_seeds: tuple[int, ...] = FRESH_SEEDS
    ) -> None:
        self.spec, self.cache_dir = spec, cache_dir
        self.fresh_seeds = fresh_seeds  # each recommendation's re-training seeds (--fresh-seeds)
        self.n_train = len(check_inputs(spec).train)
        self.target = spec.budget.target_examples or self.n_train
        self.runs_csv = out_dir / f"e2e_{spec.name}_runs.csv"
        self.race_csv = out_dir / f"e2e_{spec.name}_race.csv"
        _upgrade(self.runs_csv, RUN_FIELDS)
        _upgrade(self.race_csv, RACE_FIELDS)
        self.runs = {(_row_key(r), int(r["train_seed"])): r for r in _read(self.runs_csv)}
        # one evaluation at the end, over the whole validation split, no timeout: as `autotune train`
        budget = spec.budget.model_copy(
            update={"train_examples": self.target, "evals": 1, "max_eval_examples": None, "timeout_s": None}
        )
        self.target_spec = spec.model_copy(update={"budget": budget})
        self._worker: TrialFn | None = None
        # a dry pass (``confirm --part``) lists every run asked for here and trains none
        self.plan: list[tuple[str, Key, int]] | None = None

    def run(self, kind: str, key: Key, seed: int) -> dict[str, str]:
        if self.plan is not None:
            self.plan.append((kind, key, seed))
        hit = self.runs.get((key, seed))
        if hit is None and self.plan is None:  # another bench process on the same table may have it
            self.runs.update({(_row_key(r), int(r["train_seed"])): r for r in _read(self.runs_csv)})
            hit = self.runs.get((key, seed))
        if hit is not None:
            return hit
        if self.plan is not None:  # a stand-in that no table keeps: the dry pass only needs the keys
            return {"score": "1", "accuracy": "", "examples": "0"}
        from autotune.trial import trial_config

        if self._worker is None:
            from autotune.study.driver import default_trial_fn

            warnings.filterwarnings("ignore")
            self._worker = default_trial_fn()
        params = {"rank": key[0], "batch_size": key[1], "learning_rate": float(key[2]), **json.loads(key[3] or "{}")}
        c = trial_config(self.target_spec, params, self.cache_dir, train_seed=seed)
        r = self._worker(c, lambda _k, _v: False, None)
        row = {"kind": kind, "rank": key[0], "batch_size": key[1], "learning_rate": key[2], "train_seed": seed,
               "state": r.state.value, "score": _fmt(r.score), "val_loss": _fmt(r.val_loss),
               "accuracy": _fmt(r.accuracy), "examples": r.examples_seen, "wall_s": f"{r.wall_time_s:.1f}",
               "params": key[3]}  # fmt: skip
        _append(self.runs_csv, RUN_FIELDS, row)
        self.runs[(key, seed)] = {k: str(v) for k, v in row.items()}
        print(f"{kind}: r={key[0]} b={key[1]} lr={key[2]} {key[3]} seed {seed}: {r.state.value} {_fmt(r.score)}",
              flush=True)  # fmt: skip
        return self.runs[(key, seed)]

    def score(self, key: Key, seed: int) -> float:
        if self.plan is not None and (key, seed) not in self.runs:
            return 1.0  # the dry pass's stand-in (``run``)
        s = self.runs[(key, seed)]["score"]
        return float(s) if s else math.inf  # a run that diverged or ran out of memory scores worst

    def grid(self, part: tuple[int, int] = (0, 1)) -> list[Key]:
        """Every grid run; ``part`` (i, n) trains only every n-th config from the i-th, so that n
        processes on the same table can share the grid (the others are read back from the table)."""
        keys = grid_configs(self.spec)
        for k in keys[part[0] :: part[1]]:
            self.run("grid", k, 0)
        return keys

    def grid_compute(self) -> int:
        """The examples the grid trained (a batch rounds the target up to whole steps)."""
        return sum(int(self.runs[(k, 0)]["examples"]) for k in self.grid())

    def target_cost(self) -> int:
        """Examples one run at the target budget processes at the grid's largest batch (whole steps)."""
        return max(int(self.runs[(k, 0)]["examples"]) for k in self.grid())

    def top(self) -> list[Key]:
        return sorted(self.grid(), key=lambda k: (self.score(k, 0), k))[:ORACLE_TOP]

    def oracle(self) -> Key:
        top = self.top()
        for k in top:
            for s in ORACLE_SEEDS:
                self.run("oracle", k, s)
        return min(top, key=lambda k: (statistics.mean(self.score(k, s) for s in (0, *ORACLE_SEEDS)), k))

    def spread(self, key: Key, seeds: tuple[int, ...]) -> float:
        xs = [self.score(key, s) for s in seeds]
        return (max(xs) - min(xs)) / statistics.mean(xs)

    def regret_se(self) -> float | None:
        """The standard error of one regret as measured here (a config's mean over the n fresh
        seeds against the oracle's): the fresh seeds' pooled relative standard deviation over every
        config trained with all of them, times sqrt(2/n). Conservative: every config shares the
        fresh seeds (init, data order), so their errors are partly shared and cancel in a regret."""
        rel = []
        seeds = self.fresh_seeds
        for key in {k for (k, s) in self.runs if s == seeds[0]}:
            if all((key, s) in self.runs for s in seeds):
                xs = [self.score(key, s) for s in seeds]
                if all(math.isfinite(x) for x in xs):
                    rel.append(statistics.variance(xs) / statistics.mean(xs) ** 2)
        return math.sqrt(statistics.mean(rel) * 2 / len(seeds)) if rel else None

    def confirmed(self, key: Key) -> dict[str, float | None]:
        rows = [self.run("confirm", key, s) for s in self.fresh_seeds]
        scores = [float(r["score"]) if r["score"] else math.inf for r in rows]
        accs = [float(r["accuracy"]) for r in rows if r["accuracy"]]
        return {"score": statistics.mean(scores), "accuracy": statistics.mean(accs) if len(accs) == len(rows) else None}


def _sampler(strategy: str, study_seed: int) -> Any:
    """The strategy's sampler drawing from ``study_seed`` (its Sobol table too), while the study's
    own ``seed`` keeps the task's validation split and training seed."""
    import optuna

    from autotune.search.samplers import SAMPLERS
    from autotune.search.space import distributions
    from autotune.search.space_filling import SpaceFillingStartup, startup_trials

    def make(spec: StudySpec, _seed: int) -> Any:
        seeded = spec.model_copy(update={"seed": study_seed})
        if strategy == "tpe_asha":  # TPE after the same Sobol start-up: the default before the probe and sweep
            n = startup_trials(seeded)
            tpe = optuna.samplers.TPESampler(seed=study_seed, multivariate=True, constant_liar=True, n_startup_trials=n)
            return SpaceFillingStartup(tpe, distributions(seeded), n, study_seed)
        return SAMPLERS[seeded.sampler.name](seeded, study_seed)

    return make


def confirm_shape(strategy: str) -> tuple[int, int] | None:
    """``confirmKxR``: the default search, then its K best configs re-trained at the target budget
    with R training seeds in the study (budget.confirm_top / confirm_seeds); ``hedgeKxR`` the same
    with the K-th slot the best config's hedge (budget.confirm_hedge); None for the others."""
    m = re.fullmatch(r"(?:confirm|hedge)(\d+)x(\d+)", strategy)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _share(value: str) -> float:
    share = float(value)
    if not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"{value!r}: a share of the grid's compute, in (0, 1]")
    return share


def _strategy(value: str) -> str:
    if value in STRATEGIES or confirm_shape(value):
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r}: one of {', '.join(STRATEGIES)}, or confirmKxR / hedgeKxR (e.g. confirm2x2)"
    )


def strategy_spec(spec: StudySpec, strategy: str) -> StudySpec:
    """The task with autotune's default settings of the strategy's sampler and pruner (what a user
    gets without tuning the tuner)."""
    shape = confirm_shape(strategy)
    sampler, pruner = (
        ("tpe", "asha")
        if shape or strategy == "rungs"
        else {"default": ("tpe", "asha"), "tpe_asha": ("tpe", "asha"), "random_asha": ("random", "asha")}[strategy]
    )
    data = spec.model_dump(mode="json")
    if strategy == "rungs":  # multi-fidelity to the target: every trial's full budget is the target
        # budget, evaluated as often per example as the short trials (so ASHA's first rung costs the
        # same), and its rungs (evaluations 1, 3, 9... of reduction factor 3) end at the target
        b = spec.budget
        target = b.target_examples or len(check_inputs(spec).train)
        data["budget"].update(train_examples=target, evals=max(b.evals, round(target * b.evals / b.train_examples)))
    data["sampler"] = SamplerSpec(name=sampler).model_dump(mode="json")  # type: ignore[arg-type]
    data["pruner"] = PrunerSpec(name=pruner).model_dump(mode="json")  # type: ignore[arg-type]
    if shape:
        data["budget"].update(
            confirm_top=shape[0], confirm_seeds=shape[1], keep_adapters=0, confirm_hedge=strategy.startswith("hedge")
        )
    else:  # the search alone, read at each share: its best trial so far is its recommendation
        data["budget"].update(confirm_top=0, keep_adapters=0)
    return parse_spec(data, f"{strategy} spec")


def _tracked(
    bench: Bench, label: str, seed: int, sspec: StudySpec, state: dict[str, int], stop: Callable[[TrialConfig], bool]
) -> TrialFn:
    """The real worker, each trial a row of the race table under ``label`` with the compute spent
    so far; once ``stop(config)`` says so after a trial, the driver's loop ends (that trial stored)."""
    from autotune.study.driver import default_trial_fn

    worker = default_trial_fn()

    def tracked(c: TrialConfig, report: ReportFn, interrupt: threading.Event | None) -> TrialResult:
        r = worker(c, report, interrupt)
        state["compute"] += r.examples_seen
        state["n"] += 1
        _append(bench.race_csv, RACE_FIELDS, {
            "strategy": label, "seed": seed, "trial": state["n"], "rank": c.rank, "batch_size": c.batch_size,
            "learning_rate": f"{c.learning_rate:.6g}", "state": r.state.value, "score": _fmt(r.score),
            "examples_seen": r.examples_seen, "compute": state["compute"], "params": _extra(sspec, c),
        })  # fmt: skip
        if stop(c) and interrupt is not None:
            state["stopped"] = 1  # the race's own stop, not a signal's (see _signalled)
            interrupt.set()
        return r

    return tracked


def _signalled(summary: Any, state: dict[str, int]) -> None:
    """A study ended by SIGINT or SIGTERM rather than by the race's own stop: leave with no end row,
    so the seed runs again from the start next time (with one, the cut study counted as raced)."""
    if summary.interrupted and not state.get("stopped"):
        raise SystemExit("race: stopped by a signal; this seed has no end row and runs again next time")


def race_one(bench: Bench, strategy: str, seed: int, cap: float, max_trials: int) -> None:
    """One study of ``strategy`` with sampler seed ``seed``, stopped once it has spent ``cap`` of
    the grid's compute; every trial a row of the race table, then an end row."""
    from autotune.study.driver import run_study

    sspec = strategy_spec(bench.spec, strategy)
    limit = cap * bench.grid_compute()
    state = {"compute": 0, "n": 0}
    tracked = _tracked(bench, strategy, seed, sspec, state, lambda _c: state["compute"] >= limit)

    with tempfile.TemporaryDirectory() as tmp:
        ran = run_study(sspec, f"sqlite:///{tmp}/race.db", n_trials=max_trials, show_progress=False,
                        cache_dir=bench.cache_dir, trial_fn=tracked, sampler=_sampler(strategy, seed))  # fmt: skip
    _signalled(ran, state)
    _append(bench.race_csv, RACE_FIELDS, {"strategy": strategy, "seed": seed, "trial": "end",
                                          "compute": state["compute"]})  # fmt: skip
    print(f"race {strategy} seed {seed}: {state['n']} trials, {state['compute']} examples", flush=True)


def race_confirm(bench: Bench, strategy: str, seed: int, share: float, max_trials: int) -> None:
    """A ``confirmKxR`` study read at ``share``: the default search while another full short trial
    still leaves room for the K x R runs at the target within ``share`` of the grid's compute, then
    the study's own confirmation (the driver's, as a user runs it: ``resume`` with the trials it
    has). Its recommendation is the study's ``best``. Rows: ``strategy@share``, then a ``rec`` row."""
    from autotune.storage import Store
    from autotune.study.driver import resume_study, run_study

    shape = confirm_shape(strategy)
    assert shape is not None
    sspec = strategy_spec(bench.spec, strategy)
    label = f"{strategy}@{share}"
    confirm_cost = shape[0] * shape[1] * bench.target_cost()
    room = share * bench.grid_compute() - confirm_cost
    state = {"compute": 0, "n": 0}

    def no_room(c: TrialConfig) -> bool:  # a search trial after which another would not fit
        return c.budget.train_examples != bench.target and state["compute"] + c.budget.train_examples > room

    tracked = _tracked(bench, label, seed, sspec, state, no_room)

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/race.db"
        if room >= sspec.budget.train_examples:
            ran = run_study(sspec, url, n_trials=max_trials, show_progress=False, cache_dir=bench.cache_dir,
                            trial_fn=tracked, sampler=_sampler("default", seed))  # fmt: skip
            _signalled(ran, state)
            state["stopped"] = 0  # the confirmation runs to its end: only a signal stops it
            store = Store.open(url, create=False)
            try:
                searched = sum(r["confirm_of"] is None for r in store.trials(sspec.name))
            finally:
                store.close()
            ran = resume_study(url, sspec.name, n_trials=searched, show_progress=False, cache_dir=bench.cache_dir,
                               trial_fn=tracked)  # fmt: skip
            _signalled(ran, state)
            store = Store.open(url, create=False)
            try:
                best = store.best(sspec.name)
            finally:
                store.close()
        else:
            best = None  # the confirmation alone costs more than the share
    rec: dict[str, Any] = {"strategy": label, "seed": seed, "trial": "rec", "compute": state["compute"]}
    if best is not None:
        p = best["params"]
        extra = {k: v for k, v in p.items() if k not in ("rank", "batch_size", "learning_rate")}
        lr = f"{float(p['learning_rate']):.6g}"
        params = json.dumps(extra, sort_keys=True) if extra else ""
        rec.update(rank=p["rank"], batch_size=p["batch_size"], learning_rate=lr,
                   score=_fmt(best.get("confirmed_score")), params=params)  # fmt: skip
    _append(bench.race_csv, RACE_FIELDS, rec)
    _append(bench.race_csv, RACE_FIELDS, {"strategy": label, "seed": seed, "trial": "end", "compute": state["compute"]})
    print(f"race {label} seed {seed}: {state['n']} trials, {state['compute']} examples", flush=True)


def race_warm(bench: Bench, seed: int, cap: float, max_trials: int) -> None:
    """``warm``: warm start measured honestly (issue 20). An earlier study first, with another
    sampler seed (seed + 1000) and half the short-trial budget, the spec's n_trials (its rows:
    ``warm_prior``); then the default study warm-started from it, as ``run --warm-start`` does,
    stopped at ``cap`` of the grid's compute *counting the earlier study's examples too*. Its
    recommendation is the best of its own trials, never a prior's."""
    from autotune.study.driver import run_study
    from autotune.study.warm_start import warm_start

    sspec = strategy_spec(bench.spec, "default")
    data = sspec.model_dump(mode="json")
    data["name"] = "earlier"
    data["budget"]["train_examples"] = max(1, sspec.budget.train_examples // 2)
    earlier = parse_spec(data, "earlier study")
    limit = cap * bench.grid_compute()
    state = {"compute": 0, "n": 0}
    prior_fn = _tracked(bench, "warm_prior", seed, earlier, state, lambda _c: False)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/race.db"
        ran = run_study(earlier, url, show_progress=False, cache_dir=bench.cache_dir, trial_fn=prior_fn,
                        sampler=_sampler("default", seed + 1000))  # fmt: skip
        _signalled(ran, state)
        warm_start(sspec, url, sspec.name, "earlier")
        state["n"] = 0
        main_fn = _tracked(bench, "warm", seed, sspec, state, lambda _c: state["compute"] >= limit)
        ran = run_study(sspec, url, n_trials=max_trials, show_progress=False, cache_dir=bench.cache_dir,
                        trial_fn=main_fn, sampler=_sampler("default", seed))  # fmt: skip
        _signalled(ran, state)
    for label in ("warm_prior", "warm"):
        _append(bench.race_csv, RACE_FIELDS, {"strategy": label, "seed": seed, "trial": "end",
                                              "compute": state["compute"]})  # fmt: skip
    print(
        f"race warm seed {seed}: {state['n']} trials after the earlier study, {state['compute']} examples", flush=True
    )


def race(
    bench: Bench,
    strategies: list[str],
    seeds: int,
    cap: float,
    max_trials: int,
    readings: tuple[float, ...] = READINGS,
    only: tuple[int, ...] | None = None,
) -> None:
    """Each strategy's studies for study seeds 0..seeds-1 (or ``only`` those), skipping a seed that
    has its end row. A seed stopped midway runs again from its start: its rows are dropped first,
    but only this call's own seeds', so that another process racing other seeds keeps its rows."""
    mine = [s for s in range(seeds) if only is None or s in only]
    labels = {f"{st}@{sh}" if confirm_shape(st) else st for st in strategies for sh in readings}
    rows = _read(bench.race_csv)
    done = {(r["strategy"], int(r["seed"])) for r in rows if r["trial"] == "end"}

    def stale(r: dict[str, str]) -> bool:
        key = (r["strategy"], int(r["seed"]))
        return key not in done and r["strategy"].replace("warm_prior", "warm") in labels and key[1] in mine

    if any(stale(r) for r in rows):
        bench.race_csv.unlink()
        for r in rows:
            if not stale(r):
                _append(bench.race_csv, RACE_FIELDS, r)
    for strategy in strategies:
        for seed in mine:
            if confirm_shape(strategy):
                for share in readings:
                    if (f"{strategy}@{share}", seed) not in done:
                        race_confirm(bench, strategy, seed, share, max_trials)
            elif strategy == "warm" and (strategy, seed) not in done:
                race_warm(bench, seed, cap, max_trials)
            elif strategy not in ("grid_random", "warm") and (strategy, seed) not in done:
                race_one(bench, strategy, seed, cap, max_trials)


def recommendations(bench: Bench, strategy: str, seed: int) -> dict[float, Key | None]:
    """The config each study recommends at each reading: its best complete trial among those it had
    finished within that share of the grid's compute (None: no complete trial yet)."""
    out: dict[float, Key | None] = {}
    if strategy == "grid_random":  # the grid's own runs, in an order drawn from the study seed
        order = grid_configs(bench.spec)
        random.Random(seed).shuffle(order)
        for share in READINGS:
            k = math.floor(share * len(order) + 1e-9)
            seen = order[:k]
            out[share] = min(seen, key=lambda c: (bench.score(c, 0), c)) if seen else None
        return out
    if confirm_shape(strategy):  # one study per reading; its recommendation is the study's own
        for share in READINGS:
            label = f"{strategy}@{share}"
            rows = [r for r in _read(bench.race_csv) if r["strategy"] == label and int(r["seed"]) == seed]
            rec = next((r for r in rows if r["trial"] == "rec"), None)
            if rec is not None:  # no row at all: that reading was not run (`race --readings`)
                out[share] = _row_key(rec) if rec["rank"] else None
        return out
    rows = [r for r in _read(bench.race_csv) if r["strategy"] == strategy and int(r["seed"]) == seed]
    trials = [r for r in rows if r["trial"] != "end"]
    end = next((int(r["compute"]) for r in rows if r["trial"] == "end"), None)
    if end is None:  # a seed not raced (or still racing): no reading, not a seed without a recommendation
        return out
    for share in READINGS:
        limit = share * bench.grid_compute()
        if end < limit:  # raced to a lower cap (--max-share): this reading was not run
            continue
        done = [r for r in trials if int(r["compute"]) <= limit and r["state"] == "complete" and r["score"]]
        best = min(done, key=lambda r: float(r["score"]), default=None)
        out[share] = None if best is None else _row_key(best)
    return out


def summary(bench: Bench, strategies: list[str], seeds: int, readings: tuple[float, ...] = READINGS) -> dict[str, Any]:
    """Regrets at each of ``readings`` (a reading left out is None: e.g. studies raced only to 0.2).
    A strategy is read on the seeds of 0..seeds-1 it raced (``seeds@<share>`` counts them); two
    strategies are paired on the seeds both raced."""
    oracle = bench.oracle()
    ref = bench.confirmed(oracle)
    top = bench.top()
    spreads = {f"{k[0]}/{k[1]}/{k[2]}": bench.spread(k, (0, *ORACLE_SEEDS)) for k in top}
    noise = statistics.median(spreads.values())
    pick = top[0]

    def regret(key: Key | None) -> tuple[float, float | None]:
        if key is None:
            return math.inf, None
        got = bench.confirmed(key)
        assert got["score"] is not None and ref["score"] is not None
        acc = None if got["accuracy"] is None or ref["accuracy"] is None else ref["accuracy"] - got["accuracy"]
        return got["score"] / ref["score"] - 1, acc

    pick_regret, pick_acc = regret(pick)
    table: dict[str, Any] = {}
    for strategy in strategies:
        per_seed: list[dict[str, Any]] = []
        regrets: dict[float, list[float]] = {s: [] for s in READINGS}
        for seed in range(seeds):
            recs = recommendations(bench, strategy, seed)
            row: dict[str, Any] = {}
            for s in readings:
                if s not in recs:
                    continue
                r, acc = regret(recs[s])
                regrets[s].append(r)
                row[str(s)] = {"config": recs[s], "regret": r, "acc_regret": acc}
            per_seed.append(row)
        # a reading no seed ran (a confirmKxR race given --readings) is None, not a regret
        table[strategy] = {
            "seeds": per_seed,
            **{f"median_regret@{s}": statistics.median(regrets[s]) if regrets[s] else None for s in READINGS},
            **{f"within_noise@{s}": sum(r <= noise for r in regrets[s]) if regrets[s] else None for s in READINGS},
            **{f"seeds@{s}": len(regrets[s]) for s in READINGS},
        }
    shipped_name = shipped({"strategies": table})
    at = {st: {i: row["0.2"]["regret"] for i, row in enumerate(t["seeds"]) if "0.2" in row} for st, t in table.items()}
    mine = at.get(shipped_name, {})
    # the configs behind each regret, for the bootstrap that resamples their fresh seeds (e2e_boot)
    picked = {
        st: {i: row["0.2"]["config"] for i, row in enumerate(t["seeds"]) if "0.2" in row} for st, t in table.items()
    }
    fresh: e2e_boot.Scores = {}

    def label(key: Key | None) -> str:
        if key is None:  # no recommendation: an infinite regret, left out like the sign test leaves it
            fresh["none"] = [math.inf] * len(bench.fresh_seeds)
            return "none"
        name = config_name(key)
        fresh[name] = [bench.score(key, s) for s in bench.fresh_seeds]
        return name

    def both_ways(a: list[float], b: list[float], pairs: list[tuple[str, str]]) -> dict[str, Any]:
        return {**paired(a, b), "pairs": pairs, "boot": e2e_boot.boot(pairs, label(oracle), fresh)}

    compared = {}
    for other in table:
        both = sorted(mine.keys() & at[other].keys())
        if other != shipped_name and both:
            compared[f"{shipped_name} vs {other}"] = both_ways(
                [mine[i] for i in both],
                [at[other][i] for i in both],
                [(label(picked[shipped_name][i]), label(picked[other][i])) for i in both],
            )
    if mine:
        compared[f"{shipped_name} vs grid_pick"] = both_ways(
            list(mine.values()),
            [pick_regret] * len(mine),
            [(label(picked[shipped_name][i]), label(pick)) for i in mine],
        )
    res = {
        "task": bench.spec.name,
        "target_examples": bench.target,
        "grid_configs": len(grid_configs(bench.spec)),
        "grid_compute": bench.grid_compute(),
        "oracle": {
            "config": oracle,
            "fresh_mean_score": ref["score"],
            "fresh_mean_accuracy": ref["accuracy"],
            "seed_spread": bench.spread(oracle, (0, *ORACLE_SEEDS)),
        },
        "grid_pick": {"config": pick, "regret": pick_regret, "acc_regret": pick_acc},
        "noise_median_spread_top8": noise,
        "top8_seed_spread": spreads,
        "fresh_seeds": bench.fresh_seeds,
        "regret_se": bench.regret_se(),
        "paired@0.2": compared,
        # every compared config's score at each fresh seed, and the oracle's label: e2e_pooled's bootstrap
        "fresh_scores": fresh,
        "fresh_oracle": label(oracle),
        "strategies": table,
    }
    return res


def paired(a: list[float], b: list[float]) -> dict[str, Any]:
    """Strategy ``a`` against ``b`` on the same study seeds at one reading: the per-seed regret
    differences (a - b), the seeds each is better in, and an exact two-sided sign test's p (ties
    left out). With 5 seeds only 5 of 5 reaches p < 0.1 (0.0625); 4 of 5 is p = 0.375."""
    d = [x - y for x, y in zip(a, b, strict=True) if math.isfinite(x) and math.isfinite(y)]
    better, worse = sum(x < 0 for x in d), sum(x > 0 for x in d)
    return {"diffs": d, "median_diff": statistics.median(d) if d else None, "better_in": better,
            "worse_in": worse, "sign_test_p": sign_test(better, worse)}  # fmt: skip


def sign_test(better: int, worse: int) -> float:
    """An exact two-sided sign test's p for ``better`` against ``worse`` (ties already left out)."""
    n = better + worse
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(min(better, worse) + 1)) / 2**n) if n else 1.0


def shipped(res: dict[str, Any]) -> str:
    """The strategy that stands for autotune's default in the last line: SHIPPED (the search, then
    its confirmation) where it was summarised at 0.2, else ``default`` (the search alone), so an
    earlier default raced on a task is never reported as today's."""
    st = res["strategies"]
    return SHIPPED if st.get(SHIPPED, {}).get("median_regret@0.2") is not None else "default"


def _last_line(res: dict[str, Any], seeds: int) -> str:
    st = res["strategies"]

    def med(name: str) -> str:
        m = st[name]["median_regret@0.2"] if name in st else None
        return "nan" if m is None else f"{m:.4f}"  # not summarised, or no seed raced at 0.2

    default = shipped(res)
    reached = st[default]["within_noise@0.2"] if default in st else 0
    raced = st[default]["seeds@0.2"] if default in st else seeds
    return (
        f"e2e task={res['task']} default_regret@0.2={med(default)} random_asha_regret@0.2={med('random_asha')} "
        f"grid_pick_regret={res['grid_pick']['regret']:.4f} noise={res['noise_median_spread_top8']:.4f} "
        f"reached={reached}/{raced}"
    )


def confirm_part(
    bench: Bench, strategies: list[str], seeds: int, readings: tuple[float, ...], part: tuple[int, int]
) -> None:
    """Train the ``part`` (i, n) share of the runs the summary asks for: a dry pass lists them all,
    and this process trains the missing ones whose config's place in the list plus the seed is i
    modulo n. The share does not depend on what the table holds yet, so n processes on one table,
    started at any time, never train the same config and seed twice (two plain ``confirm``
    processes can, when both reach one at once)."""
    grid = grid_configs(bench.spec)
    if any((k, 0) not in bench.runs for k in grid) or any(
        (k, s) not in bench.runs for k in bench.top() for s in ORACLE_SEEDS
    ):
        # the dry pass would pick the oracle among stand-in scores, and plan the wrong config's runs
        raise SystemExit("end_to_end: confirm --part needs the grid and the oracle stages finished first")
    bench.plan = []
    summary(bench, strategies, seeds, readings)
    kinds: dict[tuple[Key, int], str] = {}
    for kind, key, seed in bench.plan:
        kinds.setdefault((key, seed), kind)  # in the summary's order; the first asker names the run
    configs = {key: i for i, key in enumerate(dict.fromkeys(key for _kind, key, _seed in bench.plan))}
    bench.plan = None
    # by config and seed together: a config's missing seeds (e.g. 104-106) alternate between the
    # parts, where every n-th run of the list would give one part two of each three
    mine = [w for w in kinds if (configs[w[0]] + w[1]) % part[1] == part[0] and w not in bench.runs]
    print(f"confirm part {part[0]}/{part[1]}: {len(mine)} runs to train of the {len(kinds)} asked for", flush=True)
    for key, seed in mine:
        bench.run(kinds[(key, seed)], key, seed)


def summary_name(task: str, fresh_seeds: int) -> str:
    """The summary's file: ``e2e_<task>.json`` with the 3 fresh seeds, ``e2e_<task>_fresh<N>.json``
    with N, so that one runs table serves both and neither summary overwrites the other."""
    return f"e2e_{task}.json" if fresh_seeds == len(FRESH_SEEDS) else f"e2e_{task}_fresh{fresh_seeds}.json"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=("grid", "oracle", "race", "confirm", "summary", "all"))
    ap.add_argument("--spec", required=True)
    ap.add_argument("--strategies", nargs="+", default=list(DEFAULT_STRATEGIES), type=_strategy)
    ap.add_argument("--seeds", type=int, default=5, help="study seeds per strategy (default: 5)")
    ap.add_argument("--max-share", type=float, default=max(READINGS), help="a study's compute cap, of the grid's")
    ap.add_argument("--max-trials", type=int, default=200)
    ap.add_argument("--fresh-seeds", type=int, default=len(FRESH_SEEDS), help="training seeds each "
                    "recommendation is re-trained with, from 101 (default 3); more resolve smaller "
                    "regrets")  # fmt: skip
    ap.add_argument("--out-dir", default=str(RESULTS))
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument(
        "--readings",
        nargs="+",
        type=_share,
        default=list(READINGS),
        help="the readings a confirmKxR strategy runs a study for (one study each; any share of the grid's "
        "compute, e.g. e2e_replicates' equal-compute reading), and those the summary reads (of 0.1, 0.2, "
        "0.4; default: all)",
    )
    ap.add_argument("--only-seeds", nargs="+", type=int, default=None,
                    help="race stage: only these study seeds (so processes share a strategy's seeds)")  # fmt: skip
    ap.add_argument("--part", default="0/1", help="grid stage: every n-th config from the i-th (i/n); confirm "
                    "stage: the i-th of n shares of the runs it lacks; so that n processes share the work")  # fmt: skip
    args = ap.parse_args(argv)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    i, _, n = args.part.partition("/")
    part = (int(i), int(n or 1))
    fresh = tuple(range(FRESH_SEEDS[0], FRESH_SEEDS[0] + args.fresh_seeds))
    bench = Bench(load_spec(args.spec), out, args.cache_dir, fresh)
    print(f"task {bench.spec.name}: target {bench.target} examples ({bench.target / bench.n_train:.2g} epochs), "
          f"grid of {len(grid_configs(bench.spec))} configs", flush=True)  # fmt: skip
    stages: dict[str, Callable[[], Any]] = {
        "grid": lambda: bench.grid(part),
        "oracle": bench.oracle,
        "race": lambda: race(
            bench,
            args.strategies,
            args.seeds,
            args.max_share,
            args.max_trials,
            tuple(args.readings),
            tuple(args.only_seeds) if args.only_seeds else None,
        ),
    }
    for name in ("grid", "oracle", "race"):
        if args.stage in (name, "all"):
            stages[name]()
    if args.stage == "confirm" and part[1] > 1:
        confirm_part(bench, args.strategies, args.seeds, tuple(args.readings), part)
    elif args.stage in ("confirm", "summary", "all"):
        res = summary(bench, args.strategies, args.seeds, tuple(args.readings))
        if args.stage != "confirm":
            (out / summary_name(bench.spec.name, args.fresh_seeds)).write_text(json.dumps(res, indent=2) + "\n")
            for strategy, t in res["strategies"].items():
                print(f"{strategy}: " + " ".join(f"regret@{s} {t[f'median_regret@{s}']:+.4f} "
                                                 f"({t[f'within_noise@{s}']}/{t[f'seeds@{s}']} within noise)"
                                                 if t[f"median_regret@{s}"] is not None else f"regret@{s} not run"
                                                 for s in READINGS))  # fmt: skip
            print(f"the default is {shipped(res)}" + (" (the search alone)" if shipped(res) == "default" else ""))
            se = res["regret_se"]
            print(f"a regret's standard error: {se:.4f}" if se is not None else "a regret's standard error: n/a")
            for name, c in res["paired@0.2"].items():
                if c["median_diff"] is not None:
                    print(
                        f"paired@0.2 {name}: median diff {c['median_diff']:+.4f}, better in {c['better_in']}, "
                        f"worse in {c['worse_in']} of {len(c['diffs'])} seeds, sign test p={c['sign_test_p']:.3f}"
                    )
                if c["boot"] is not None:
                    b = c["boot"]
                    print(
                        f"  bootstrap over study and fresh seeds: mean diff {b['mean_diff']:+.4f}, 95% "
                        f"[{b['ci95'][0]:+.4f}, {b['ci95'][1]:+.4f}], better in {b['share_better']:.0%} of replicates"
                    )
            print(_last_line(res, args.seeds))


if __name__ == "__main__":
    main()
