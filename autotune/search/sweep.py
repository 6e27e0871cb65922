"""After the start-up: try the bound when the best sits next to it, then step around the best.

Short LoRA trials are under-trained, and their optimum lies at the edge of the searched range
more often than inside it: on issue 10's held-out task all 8 best grid points had the highest
learning rate, and on the quickstart grid the 6 best do. TPE then needs many trials to land
within a few percent of the bound, because its kernels around a good point spread both ways and
half of that mass falls outside the range. So whenever the best complete trial lies in the outer
tenth of a numeric range (``edges.NEAR``, the rule `autotune best` uses to say "widen"), the
next trial is that best configuration with the parameter moved onto the bound, once per best.

Then (``neighbours``) a local sweep, one parameter at a time: the best with an ordered choice
(rank, batch size) moved to the next choice, or a numeric range moved by a quarter of its range,
each tried once. The steps go downhill first, as a plane fitted to the complete trials' scores
predicts (with four start-up points it sees that lr up and batch down help). A pattern search of
this kind (Hooke and Jeeves 1961) climbs the monotone landscapes of short trials in a few steps
where TPE's kernels keep sampling around the start-up points; TPE takes over once every step
from the best has been tried. Unordered choices are left to TPE.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from autotune import optuna_private
from autotune.search.bounds import NEAR
from autotune.search.priors import FROM_ATTR


def _position(v: float, d: FloatDistribution | IntDistribution) -> float:
    lo, hi = float(d.low), float(d.high)
    if d.log:
        return (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (v - lo) / (hi - lo)


# One step of the local sweep: a quarter of a numeric range (in its log scale where it has one),
# the resolution the start-up leaves (4 Sobol points fall one per quarter of each range;
# space_filling.py). Screened on the surrogate replay, 100 seeds (docs/search.md): steps of 0.125, 0.2,
# 0.25, 0.33 and 0.5 gave quickstart median shares 0.212, 0.201, 0.181, 0.181, 0.170; longer
# steps win there only because that optimum sits on a bound, which the edge probe already covers.
STEP = 0.25


def _at(pos: float, d: FloatDistribution | IntDistribution) -> float | int:
    if pos <= 0.0 or pos >= 1.0:  # the bound itself, exactly: the edge probe's value
        return d.low if pos <= 0.0 else d.high
    lo, hi = float(d.low), float(d.high)
    v = math.exp(math.log(lo) + pos * (math.log(hi) - math.log(lo))) if d.log else lo + pos * (hi - lo)
    if isinstance(d, IntDistribution):
        return min(d.high, max(d.low, d.low + d.step * round((v - d.low) / d.step)))
    if d.step is not None:
        return min(hi, max(lo, lo + d.step * round((v - lo) / d.step)))
    return min(hi, max(lo, v))


def _ordered(d: CategoricalDistribution) -> list[Any] | None:
    """The choices in order when all are numbers (rank, batch size); None for unordered ones."""
    if not all(isinstance(c, int | float) and not isinstance(c, bool) for c in d.choices):
        return None
    return sorted(d.choices)  # type: ignore[type-var]


def neighbour_params(best: dict[str, Any], space: dict[str, BaseDistribution]) -> list[dict[str, Any]]:
    """``best`` with one parameter moved one step either way: an ordered choice (all choices
    numbers: rank, batch size) to the next choice, a numeric range by ``STEP`` of the range."""
    out = []
    for name, d in space.items():
        if name not in best:
            continue
        if isinstance(d, CategoricalDistribution):
            ordered = _ordered(d)
            if ordered is None:
                continue  # unordered choices: TPE's
            i = ordered.index(best[name]) if best[name] in ordered else -1
            out += [{**best, name: ordered[j]} for j in (i - 1, i + 1) if i >= 0 and 0 <= j < len(ordered)]
        elif isinstance(d, FloatDistribution | IntDistribution) and d.high > d.low:
            pos = _position(float(best[name]), d)
            moved = (_at(min(1.0, max(0.0, pos + s)), d) for s in (-STEP, STEP))
            out += [{**best, name: v} for v in moved if not math.isclose(v, best[name], rel_tol=1e-9)]
    return out


def probe_params(best: dict[str, Any], space: dict[str, BaseDistribution]) -> list[dict[str, Any]]:
    """``best`` with one numeric parameter moved onto the bound it lies next to, per such one."""
    out = []
    for name, d in space.items():
        if not isinstance(d, FloatDistribution | IntDistribution) or name not in best or d.high <= d.low:
            continue
        pos = _position(float(best[name]), d)
        if 1 - NEAR <= pos < 1:
            out.append({**best, name: d.high})
        elif 0 < pos <= NEAR:
            out.append({**best, name: d.low})
    return out


def _unit(params: dict[str, Any], space: dict[str, BaseDistribution]) -> list[float]:
    """``params`` as positions in [0, 1] along each ordered parameter (unordered choices: 0)."""
    out = []
    for name, d in space.items():
        v = params.get(name)
        if isinstance(d, FloatDistribution | IntDistribution) and d.high > d.low and v is not None:
            out.append(_position(float(v), d))
        elif isinstance(d, CategoricalDistribution) and len(d.choices) > 1 and v in d.choices:
            ordered = _ordered(d)
            out.append(ordered.index(v) / (len(ordered) - 1) if ordered is not None else 0.0)
        else:
            out.append(0.0)
    return out


def downhill_first(
    candidates: list[dict[str, Any]], best: dict[str, Any], complete: list[FrozenTrial],
    space: dict[str, BaseDistribution], sign: float,
) -> list[dict[str, Any]]:  # fmt: skip
    """``candidates`` in the order a plane through the complete trials' scores (least squares over
    their positions) predicts them best: the sweep tries the downhill step of each parameter first."""
    scored = [t for t in complete if t.value is not None and math.isfinite(t.value)]  # not OOM's inf
    if len(scored) < 2:
        return candidates
    x = np.array([_unit(t.params, space) for t in scored])
    y = np.array([sign * float(t.value) for t in scored])  # type: ignore[arg-type]
    # centred, so that with fewer points than parameters the minimum-norm plane spends nothing on
    # the intercept (uncentred, 3 points gave the learning rate's slope the wrong sign)
    slope = np.linalg.lstsq(x - x.mean(axis=0), y - y.mean(), rcond=None)[0]
    origin = np.array(_unit(best, space))
    return sorted(candidates, key=lambda c: float(slope @ (np.array(_unit(c, space)) - origin)))


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    # a float reached by two paths (up a step, then down one) differs in the last bits
    if a.keys() != b.keys():
        return False
    return all(
        math.isclose(a[k], b[k], rel_tol=1e-9) if isinstance(a[k], float) and isinstance(b[k], float) else a[k] == b[k]
        for k in a
    )


def next_probe(
    study: Study, trial: FrozenTrial, space: dict[str, BaseDistribution], n_startup: int, neighbours: bool = False
) -> dict[str, Any] | None:
    """The probe ``trial`` should run, if any: after the start-up, the best complete trial with a
    parameter moved onto the bound it lies next to, then (``neighbours``) one step along each
    parameter, downhill first; each unless a trial of this study already has those params."""
    # from the sampler's per-ask cache (filled by this same ask): a second, uncached read of every
    # trial cost one storage round of ~7 statements per trial (bench/scaling.py --statements)
    trials = optuna_private.trials_cached(study, tuple(TrialState))
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    complete = [t for t in finished if t.state == TrialState.COMPLETE and t.value is not None]
    if not complete or len(finished) < n_startup:  # the start-up points cover the space first
        return None
    sign = 1.0 if study.direction == StudyDirection.MINIMIZE else -1.0
    best = min(complete, key=lambda t: sign * float(t.value))  # type: ignore[arg-type]
    # Every trial issued so far, running ones too: a probe is tried once, by one worker. Warm-start
    # priors (another study's trials) are not this study's own, as for the driver's duplicate check:
    # the sweep may measure their configs here (a widened follow-up study must, or TPE proposed its
    # best again and again as duplicates while a prior's config was still unmeasured here).
    tried = [t.params for t in trials if t.number != trial.number and FROM_ATTR not in t.user_attrs]
    candidates = probe_params(best.params, space)
    if neighbours:
        # a warm-start prior as the best: measure it here first, as this study's own trial (a
        # real warm-started race otherwise swept around another study's best and never ran it)
        own = [best.params] if FROM_ATTR in best.user_attrs else []
        candidates = own + candidates
        candidates += downhill_first(neighbour_params(best.params, space), best.params, complete, space, sign)
    for candidate in candidates:
        if not any(_same(candidate, t) for t in tried):
            return candidate
    return None
