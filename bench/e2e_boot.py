"""How sure is a paired win, once the fresh seeds' own noise is counted? A two-level bootstrap.

``end_to_end.py summary``'s sign test (``paired@0.2``) counts the study seeds where one strategy's
recommendation has the lower regret, as if each regret were exact. It is not: a regret is a
config's mean over a few fresh training seeds against the oracle's, and when the study seeds'
picks fall on a handful of configs (on the quickstart, ten study seeds recommend two configs),
ten seeds carry the same two measurement errors ten times. The sign test then reads one noisy
comparison of two configs as ten agreeing seeds.

This bootstrap resamples both sources (resampling at each stage of a two-stage design, as
Davison and Hinkley's "Bootstrap Methods and their Application", 1997, does for hierarchical
data): each replicate draws the fresh seeds with replacement, one draw
shared by every config (they share each seed's initialisation and data order, so their errors
are paired), recomputes every regret from those seeds, then draws the study seeds with
replacement and takes the mean regret difference. With 3 to 6 fresh seeds the draw is coarse
and its variance is about (n - 1) / n of the true one: read the interval as a lower bound on the
uncertainty, not as a test to tune to.

Used by ``end_to_end.py summary`` (each task, ``boot`` in ``paired@0.2``) and ``e2e_pooled.py``
(the tasks' replicates averaged, each task weighing the same).
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

N_BOOT = 2000
# config label -> its scores at the fresh seeds, in one seed order shared by every config
Scores = dict[str, list[float]]


def usable(pairs: list[tuple[str, str]], scores: Scores) -> list[tuple[str, str]]:
    """The study seeds' pairs whose configs scored finitely on every fresh seed (as the sign test
    leaves out a seed whose regret is infinite: no recommendation, or a run that diverged)."""
    return [(a, b) for a, b in pairs if all(math.isfinite(x) for c in (a, b) for x in scores[c])]


def replicates(pairs: list[tuple[str, str]], oracle: str, scores: Scores, n: int, rng: random.Random) -> list[float]:
    """``n`` replicates of the mean over study seeds of regret(a) - regret(b)."""
    k = len(scores[oracle])
    configs = {c for pair in pairs for c in pair}
    out = []
    for _ in range(n):
        seeds = [rng.randrange(k) for _ in range(k)]
        ref = statistics.fmean(scores[oracle][f] for f in seeds)
        regret = {c: statistics.fmean(scores[c][f] for f in seeds) / ref - 1 for c in configs}
        drawn = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        out.append(statistics.fmean(regret[a] - regret[b] for a, b in drawn))
    return out


def interval(reps: list[float], point: float) -> dict[str, Any]:
    """The point estimate, a 95% percentile interval, and the share of replicates on each side of 0."""
    s = sorted(reps)
    n = len(s)
    return {
        "mean_diff": point,
        "ci95": [s[int(0.025 * n)], s[min(n - 1, int(0.975 * n))]],
        "share_better": sum(x < 0 for x in s) / n,
        "share_worse": sum(x > 0 for x in s) / n,
        "replicates": n,
    }


def point(pairs: list[tuple[str, str]], oracle: str, scores: Scores) -> float:
    """The mean over study seeds of regret(a) - regret(b) on every fresh seed: the estimate itself."""
    ref = statistics.fmean(scores[oracle])
    return statistics.fmean(statistics.fmean(scores[a]) / ref - statistics.fmean(scores[b]) / ref for a, b in pairs)


def boot(pairs: list[tuple[str, str]], oracle: str, scores: Scores, seed: int = 0) -> dict[str, Any] | None:
    """One task's comparison: None when no study seed has two finite regrets."""
    pairs = usable(pairs, scores)
    if not pairs:
        return None
    return interval(replicates(pairs, oracle, scores, N_BOOT, random.Random(seed)), point(pairs, oracle, scores))


def pooled(tasks: list[dict[str, Any]], seed: int = 0) -> dict[str, Any] | None:
    """Several tasks' comparisons (each ``{"pairs", "oracle", "scores"}``), every task resampled
    on its own and the replicates averaged over tasks, each task weighing the same."""
    parts = [(usable([(a, b) for a, b in t["pairs"]], t["scores"]), t["oracle"], t["scores"]) for t in tasks]
    parts = [p for p in parts if p[0]]
    if not parts:
        return None
    rng = random.Random(seed)
    reps = [replicates(p, o, s, N_BOOT, rng) for p, o, s in parts]
    mean = statistics.fmean(point(p, o, s) for p, o, s in parts)
    return {**interval([statistics.fmean(col) for col in zip(*reps, strict=True)], mean), "tasks": len(parts)}
