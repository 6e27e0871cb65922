"""Is the default's edge over another strategy one that holds across tasks, not on one task's seeds?

Each task's summary (bench/results/e2e_<task>.json, written by ``end_to_end.py summary``) pairs
the default with every other strategy on the same study seeds at 20% of the grid's compute. On
one task, 5 seeds resolve little: only 5 of 5 puts a sign test under 0.1. Here every task's
paired seeds are pooled: the seeds (over all tasks) where the default's recommendation has the
lower regret, those where it has the higher, and an exact two-sided sign test over them all.
A sign test because regrets are relative but their noise is not the same on every task (one
regret's standard error is 0.4% on the smoke tasks, 3.8-5.4% on the quickstart's): a count of
seeds weighs each the same, whatever its task's scale. Each task's own count stays beside it,
so that a pooled win that one task carries is visible as such.

The sign test takes each regret as exact. Beside it, ``boot``: the two-level bootstrap of
``e2e_boot.py`` (study seeds and fresh training seeds resampled in each task, the tasks' mean
regret differences averaged, each task weighing the same), which counts the fresh seeds' own
noise: where a task's study seeds recommend a few configs, the sign test counts one noisy
comparison many times.

Run: python bench/e2e_pooled.py --tasks quickstart quickstart-interior smoke smoke-interior
(``--fresh-seeds N`` pools the summaries judged on N fresh seeds, e2e_<task>_fresh<N>.json)
Writes bench/results/e2e_pooled.json (``--out`` names another) and ends with
``e2e_pooled tasks=N vs_random_asha=B/W p=P vs_grid_pick=B/W p=P`` (B: seeds better, W: worse).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from bench import e2e_boot  # noqa: E402
from bench.end_to_end import FRESH_SEEDS, RESULTS, sign_test, summary_name  # noqa: E402


def pool(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per comparison ("<default> vs <other>", as each task's summary names it, keyed by the other
    strategy so that tasks summarised with another default still pool): each task's counts, and
    their sums with one sign test over every task that has the comparison."""
    by_other: dict[str, dict[str, dict[str, Any]]] = {}
    for task, res in results.items():
        for name, c in res["paired@0.2"].items():
            default, other = name.split(" vs ", 1)
            by_other.setdefault(other, {})[task] = {"default": default, "better_in": c["better_in"],
                                                    "worse_in": c["worse_in"], "median_diff": c["median_diff"],
                                                    "sign_test_p": c["sign_test_p"]}  # fmt: skip
    out: dict[str, Any] = {}
    for other, tasks in sorted(by_other.items()):
        better = sum(t["better_in"] for t in tasks.values())
        worse = sum(t["worse_in"] for t in tasks.values())
        # a summary written before the bootstrap existed has no pairs: the pooled bootstrap leaves it out, and says so
        boots = {
            task: {"pairs": c["pairs"], "oracle": res["fresh_oracle"], "scores": res["fresh_scores"]}
            for task, res in results.items()
            for name, c in res["paired@0.2"].items()
            if name.split(" vs ", 1)[1] == other and "pairs" in c
        }
        out[other] = {
            "tasks": tasks,
            "better_in": better,
            "worse_in": worse,
            "sign_test_p": sign_test(better, worse),
            "boot": e2e_boot.pooled(list(boots.values())),
            "boot_tasks": sorted(boots),
            # tasks whose seeds favour the default, counted by task: a pooled win carried by one task shows here
            "tasks_better": sum(t["better_in"] > t["worse_in"] for t in tasks.values()),
            "tasks_worse": sum(t["better_in"] < t["worse_in"] for t in tasks.values()),
        }
    return out


def last_line(pooled: dict[str, Any], n_tasks: int) -> str:
    def part(other: str) -> str:
        c = pooled.get(other)
        if c is None:
            return f"vs_{other}=n/a"
        return f"vs_{other}={c['better_in']}/{c['worse_in']} p={c['sign_test_p']:.4f}"

    return f"e2e_pooled tasks={n_tasks} {part('random_asha')} {part('grid_pick')}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", required=True, help="task names: each reads e2e_<task>.json")
    ap.add_argument("--out-dir", default=str(RESULTS))
    ap.add_argument("--out", default="e2e_pooled.json", help="the file written in --out-dir (default e2e_pooled.json)")
    ap.add_argument("--fresh-seeds", type=int, default=len(FRESH_SEEDS), help="read the summaries judged on this "
                    "many fresh seeds (e2e_<task>_fresh<N>.json; default 3: e2e_<task>.json)")  # fmt: skip
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    results = {}
    for task in args.tasks:
        path = out / summary_name(task, args.fresh_seeds)
        if not path.exists():
            raise SystemExit(f"e2e_pooled: {path} does not exist; run end_to_end.py summary for {task} first")
        results[task] = json.loads(path.read_text())
    pooled = pool(results)
    (out / args.out).write_text(json.dumps({"tasks": args.tasks, "compared": pooled}, indent=2) + "\n")
    for other, c in pooled.items():
        per_task = ", ".join(f"{t} {v['better_in']}/{v['worse_in']}" for t, v in c["tasks"].items())
        print(f"vs {other}: better in {c['better_in']}, worse in {c['worse_in']} seeds over {len(c['tasks'])} tasks, "
              f"sign test p={c['sign_test_p']:.4f} ({per_task})")  # fmt: skip
        if c["boot"] is not None:
            b = c["boot"]
            print(f"  bootstrap over study and fresh seeds, {b['tasks']} tasks weighing the same: mean diff "
                  f"{b['mean_diff']:+.4f}, 95% [{b['ci95'][0]:+.4f}, {b['ci95'][1]:+.4f}], "
                  f"better in {b['share_better']:.0%} of replicates")  # fmt: skip
    print(last_line(pooled, len(args.tasks)))


if __name__ == "__main__":
    main()
