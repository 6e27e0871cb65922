"""Which of its confirmed configs should a study recommend? The confirmation's choice, replayed.

After its search, the default study re-trains its 2 best configs once at the target budget and
recommends the lower target score (``target``, storage/confirm.py). One target run is one
training seed: in quickstart-interior's seed 7 it put a config whose short trial was 10% worse
ahead, and that pick had the default's worst regret (+20.4%). Two alternatives choose among the
same runs: ``short`` keeps the search's own order (the target runs then only keep an adapter),
and ``all`` weighs both measurements of a config: the lowest mean over its short-trial score and
its target runs, each run one vote (with 1 run at the target, short and target weigh the same;
with 2, the target twice as much).

A third, ``hedge``, changes what is confirmed, at the same cost: the search's best config, and
the same config with its learning rate scaled by sqrt(short budget / target budget) in place of
the runner-up, each trained once at the target; the lower target score wins. Short trials favour
large steps (Wu et al. 2018, "Understanding Short-Horizon Bias in Stochastic Meta-Optimization"),
and the best fixed step of SGD over T steps shrinks as 1/sqrt(T) (e.g. Nesterov, "Introductory
Lectures on Convex Optimization", 3.2.3): the scale is that rule, not a value fitted here. The
hedge's run is new (``Bench.run``, the study's training seed, cached in the runs table with kind
``hedge``); the best config's own target run is the study's, from the race table.

For ``short`` and ``all`` a replay is what a re-run would give: the rule acts only after the runs it reads,
which it does not choose. For ``hedge`` the search is the same (both confirm 2 configs, so the
search stops at the same point) and one target run is new. ``hedge`` is what autotune now ships
(budget.confirm_hedge, ``hedge2x1`` in end_to_end.py; the replay scales with the shipped
``autotune.study.confirm.hedge``): where a task's table also holds real
``hedge2x1@0.2`` studies, each is checked against the replay (the same search trials, and the
same recommendation): ``hedge_raced`` and ``hedge_race_mismatches``.

From each task's race table (``end_to_end.py race``, strategy ``confirmKxR@0.2``): the confirmed
configs, their best short-trial score and their target runs; each rule's pick; the shipped rule's
pick checked against the study's own recommendation (its ``rec`` row). A pick is re-trained with the
fresh seeds like any recommendation (``Bench.confirmed``: cached in the runs table, trained when
missing) and its regret is against the oracle's fresh-seed mean.

Run: python bench/e2e_rules.py --specs studies/quickstart.yaml bench/specs/quickstart-interior.yaml ...
Writes bench/results/e2e_rules.json and ends with
``e2e_rules tasks=N seeds=S short_vs_target=B/W p=P changed=C all_vs_target=... hedge_vs_target=...``
(B: seeds where the rule picks a config with a lower regret than ``target``'s, W: a higher one;
C: seeds where it picks another config; the same config is a tie).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from autotune.spec import StudySpec, load_spec  # noqa: E402
from autotune.study import confirm  # noqa: E402
from bench.end_to_end import RESULTS, Bench, Key, _key, _read, _row_key, paired, sign_test  # noqa: E402

HEDGED = "hedge2x1@0.2"  # the shipped default's studies, where raced (end_to_end.py SHIPPED)
RULES = ("target", "short", "all")  # choices among the confirmed configs, from the race table alone
ALL_RULES = (*RULES, "hedge", "hedge3")


def confirmed_configs(rows: list[dict[str, str]], short_examples: int) -> list[dict[str, Any]]:
    """One study's confirmed configs from its race rows (in trial order): each with its best short
    score, the trial that scored it (the search trial confirmed, and the tie-break: storage/confirm.py
    ranks equal means by it) and its target runs' scores (a run with no score, e.g. out of memory,
    scores worst). A target run is a row past the short budget; one that failed before its first
    step reads as a short trial that did not complete, so its config drops out of the choice, as a
    failed run's config loses it in the study."""
    trials = [r for r in rows if r["trial"] not in ("rec", "end")]
    targets = [r for r in trials if int(r["examples_seen"] or 0) > short_examples]
    short: dict[Key, tuple[float, int]] = {}
    for r in trials:
        if int(r["examples_seen"] or 0) <= short_examples and r["state"] == "complete" and r["score"]:
            k, s = _row_key(r), float(r["score"])
            if k not in short or s < short[k][0]:
                short[k] = (s, int(r["trial"]))
    out: dict[Key, dict[str, Any]] = {}
    for r in targets:
        k = _row_key(r)
        score = float(r["score"]) if r["state"] == "complete" and r["score"] else float("inf")
        out.setdefault(k, {"config": k, "short": short[k][0], "trial": short[k][1], "target": []})["target"].append(
            score
        )
    return list(out.values())


def pick(configs: list[dict[str, Any]], rule: str) -> Key | None:
    """The config ``rule`` recommends: ``target``, the lowest mean of its target runs (what the
    study ships); ``short``, the lowest short score (the search's own order: the target runs only
    keep an adapter); ``all``, the lowest mean over its short score and its target runs."""
    score: Callable[[dict[str, Any]], float] = {
        "target": lambda c: statistics.fmean(c["target"]),
        "short": lambda c: c["short"],
        "all": lambda c: statistics.fmean([c["short"], *c["target"]]),
    }[rule]
    best = min(configs, key=lambda c: (score(c), c["trial"]), default=None)
    return None if best is None else best["config"]


def _hedge_of(configs: list[dict[str, Any]], spec: StudySpec, target: int) -> tuple[dict[str, Any], Key | None] | None:
    """The search's best confirmed config and its hedge's key (None where its lr is already at the
    range's low end), as a study with ``spec`` and a target of ``target`` examples confirms it
    (``autotune.study.confirm.hedge``, the shipped rule); None when nothing was confirmed."""
    best = min(configs, key=lambda c: (c["short"], c["trial"]), default=None)
    if best is None:
        return None
    rank, batch, lr, extra = best["config"]
    scaled = confirm.hedge(spec, {"learning_rate": float(lr)}, target)
    return best, None if scaled is None else _key(rank, batch, scaled["learning_rate"], extra)


def hedge(configs: list[dict[str, Any]], spec: StudySpec, target: int, at_target: Callable[[Key], float]) -> Key | None:
    """The search's best config against its hedge, the config a study confirms in its place, whose
    one run at the target ``at_target`` trains (see the module's docstring)."""
    found = _hedge_of(configs, spec, target)
    if found is None:
        return None
    best, smaller = found
    if smaller is None:
        return best["config"]  # type: ignore[no-any-return]
    return smaller if at_target(smaller) < statistics.fmean(best["target"]) else best["config"]


def hedge3(
    configs: list[dict[str, Any]], spec: StudySpec, target: int, at_target: Callable[[Key], float]
) -> Key | None:
    """``hedge3x1`` replayed: the search's best, its runner-up and the best one's hedge, each run
    once at the target, the lowest target score wins (ties to the search's order, the hedge last).
    A real hedge3x1 study stops its search one target run earlier: this replay keeps the 2-slot
    study's search, so it spends one target run more than its share."""
    found = _hedge_of(configs, spec, target)
    if found is None:
        return None
    ranked = sorted(configs, key=lambda c: (statistics.fmean(c["target"]), c["trial"]))
    scores: dict[Key, float] = {c["config"]: statistics.fmean(c["target"]) for c in ranked}
    if found[1] is not None:
        scores.setdefault(found[1], at_target(found[1]))
    return min(scores, key=lambda k: scores[k])


def replay(bench: Bench, strategy: str, seeds: int) -> dict[str, Any]:
    """Each study seed's pick under each rule, with its regret; and each other rule against ``target``."""
    label = f"{strategy}@0.2"
    rows = _read(bench.race_csv)
    ref = bench.confirmed(bench.oracle())["score"]
    assert ref is not None
    per_seed: dict[str, Any] = {}
    mismatched, raced, hedge_mismatched = [], [], []
    drift = 0.0
    spec = bench.spec
    # every raced study trains with the task's training seed, whatever its sampler's study seed
    train_seed = spec.train_seed if spec.train_seed is not None else spec.seed  # study/confirm.py `seeds`

    scored: dict[Key, float] = {}

    def at_target(key: Key) -> float:  # hedge and hedge3 ask for the same run: asked once
        if key not in scored:
            bench.run("hedge", key, train_seed)
            scored[key] = bench.score(key, train_seed)
        return scored[key]

    short = spec.budget.train_examples
    for study_seed in range(seeds):
        mine = _seed_rows(rows, label, study_seed)
        rec = next((r for r in mine if r["trial"] == "rec"), None)
        if rec is None or not rec["rank"]:
            continue  # not raced, or no room for the confirmation: nothing to replay
        configs = confirmed_configs(mine, bench.spec.budget.train_examples)
        picks = {rule: pick(configs, rule) for rule in RULES}
        picks["hedge"] = hedge(configs, spec, bench.target, at_target)
        picks["hedge3"] = hedge3(configs, spec, bench.target, at_target)
        if picks["target"] != _row_key(rec):
            mismatched.append(study_seed)
        real = next((r for r in _seed_rows(rows, HEDGED, study_seed) if r["trial"] == "rec"), None)
        if real is not None and real["rank"]:  # the shipped hedge raced for real: does the replay match it?
            raced.append(study_seed)
            searched = [_search(mine, short), _search(_seed_rows(rows, HEDGED, study_seed), short)]
            configs_states = [[t[:5] for t in s] for s in searched]
            if not _same(picks["hedge"], _row_key(real)) or configs_states[0] != configs_states[1]:
                hedge_mismatched.append(study_seed)
            else:
                pairs = zip(*searched, strict=True)
                drift = max(drift, *(abs(float(a[5]) / float(b[5]) - 1) for a, b in pairs if a[5] and b[5]))
        per_seed[str(study_seed)] = {
            rule: {"config": k, "regret": bench.confirmed(k)["score"] / ref - 1}  # type: ignore[arg-type,operator]
            for rule, k in picks.items()
        }
    return {
        "strategy": label,
        "seeds": per_seed,
        "replay_mismatches": mismatched,  # seeds whose study recommended other than the replayed ``target``
        "hedge_raced": raced,  # seeds raced for real as HEDGED (budget.confirm_hedge, the default)
        # of those, seeds whose study searched other configs (or ended in other states) or recommended
        # other than the replay
        "hedge_race_mismatches": hedge_mismatched,
        # the largest relative difference between the same search trial's score in the two studies,
        # where they searched the same configs: a study raced in another session can differ in
        # float summation order, which a large learning rate amplifies (the same configs and states)
        "hedge_race_score_drift": drift,
        **{f"median_regret_{r}": statistics.median(s[r]["regret"] for s in per_seed.values()) for r in ALL_RULES},
        **{f"{r}_vs_target": against(per_seed, r) for r in ALL_RULES if r != "target"},
        "hedge3_vs_hedge": against(per_seed, "hedge3", "hedge"),  # the runner-up's slot, on top of the shipped rule
    }


def _seed_rows(rows: list[dict[str, str]], label: str, seed: int) -> list[dict[str, str]]:
    return [r for r in rows if r["strategy"] == label and int(r["seed"]) == seed]


def _same(a: Key | None, b: Key) -> bool:
    """The same config, learning rates equal to the 6 significant digits the CSVs print: the
    replay scales the printed lr, the study its full-precision one, so the last digit may differ."""
    if a is None or (a[0], a[1], a[3]) != (b[0], b[1], b[3]):
        return False
    return math.isclose(float(a[2]), float(b[2]), rel_tol=1e-5)


def _search(rows: list[dict[str, str]], short_examples: int) -> list[tuple[str, ...]]:
    """A study's search trials as raced (config, state, score), in order: the same study seed
    searches the same way whatever its confirmation does after."""
    return [
        (r["rank"], r["batch_size"], r["learning_rate"], r["params"], r["state"], r["score"])
        for r in rows
        if r["trial"] not in ("rec", "end") and int(r["examples_seen"] or 0) <= short_examples
    ]


def against(per_seed: dict[str, Any], rule: str, ref: str = "target") -> dict[str, Any]:
    """``rule`` against ``ref`` (the 2-slot confirmation's ``target``) on the same seeds, as
    ``end_to_end.paired`` pairs two strategies (the same config is a tie), and the seeds where its
    pick differs."""
    seeds = per_seed.values()
    changed = sum(s[rule]["config"] != s[ref]["config"] for s in seeds)
    return {**paired([s[rule]["regret"] for s in seeds], [s[ref]["regret"] for s in seeds]), "changed": changed}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", nargs="+", required=True, help="each task's spec (its race table is read)")
    ap.add_argument("--strategy", default="confirm2x1", help="the confirmKxR strategy replayed (default confirm2x1)")
    ap.add_argument("--seeds", type=int, default=10, help="study seeds 0..N-1 read (those raced)")
    ap.add_argument("--out-dir", default=str(RESULTS))
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    tasks: dict[str, Any] = {}
    for path in args.specs:
        bench = Bench(load_spec(path), out, None)
        if not bench.race_csv.exists():
            raise SystemExit(f"e2e_rules: {bench.race_csv} does not exist; race {args.strategy} on {path} first")
        tasks[bench.spec.name] = replay(bench, args.strategy, args.seeds)
        t = tasks[bench.spec.name]
        print(f"{bench.spec.name}: {len(t['seeds'])} seeds, replay mismatches {t['replay_mismatches']}, hedge raced "
              f"{len(t['hedge_raced'])} (mismatches {t['hedge_race_mismatches']}, score drift "
              f"{t['hedge_race_score_drift']:.2e}), median regret "
              + ", ".join(f"{r} {t[f'median_regret_{r}']:+.4f}" for r in ALL_RULES) + "; "
              + ", ".join(f"{r} vs target {t[f'{r}_vs_target']['better_in']}/{t[f'{r}_vs_target']['worse_in']} "
                          f"({t[f'{r}_vs_target']['changed']} changed)" for r in ALL_RULES if r != "target"),
              flush=True)  # fmt: skip
    pooled = {}
    for r, field in [*((r, f"{r}_vs_target") for r in ALL_RULES[1:]), ("hedge3_vs_hedge", "hedge3_vs_hedge")]:
        better = sum(t[field]["better_in"] for t in tasks.values())
        worse = sum(t[field]["worse_in"] for t in tasks.values())
        changed = sum(t[field]["changed"] for t in tasks.values())
        pooled[r] = {
            "changed": changed,
            "better_in": better,
            "worse_in": worse,
            "sign_test_p": sign_test(better, worse),
        }
    res = {"strategy": args.strategy, "pooled_vs_target": pooled, "tasks": tasks}
    (out / "e2e_rules.json").write_text(json.dumps(res, indent=2) + "\n")
    n = sum(len(t["seeds"]) for t in tasks.values())
    print(f"e2e_rules tasks={len(tasks)} seeds={n} " + " ".join(
        f"{r if '_vs_' in r else r + '_vs_target'}={c['better_in']}/{c['worse_in']} p={c['sign_test_p']:.4f} "
        f"changed={c['changed']}" for r, c in pooled.items()))  # fmt: skip


if __name__ == "__main__":
    main()
