#!/usr/bin/env python3
"""Would stopping a case on confidence keep its time? A replay of recorded samples.

S takes each case's lowest repetition mean over every visit (docs/MEASUREMENT.md, "The statistic").
A stop-on-confidence rule ends a case's visits early once its readings agree: here, once the two
lowest of its first K readings (a reading: one visit's lowest repetition mean) are within a relative
width W of each other. Whether that is safe is a property of the machine, not of the rule, so this
script replays the rule on a database's recorded samples (`measurements.samples_us`, one array of
repetition means per visit, in timing order) and reports, by the case's time:

  - stopped: the share of cases the rule would have ended after K visits;
  - visits saved and time saved: the share of visits and of timed seconds (each repetition's mean ×
    the case's calls per repetition, its iterations over its repetitions) those cases had after;
  - raised: of the stopped cases, the share whose lowest reading after K visits is above the
    lowest over all of their visits by more than W, and by more than 2% (the time S would have
    taken too high).

The same is done within one visit (`--within`): stop a visit's repetitions once its first two
agree within W. Last, for the cases with 3 to 5 visits, which visit gave the lowest reading: a
minimum that repeats comes early; one that keeps falling comes from any visit alike.

    bench/confidence_stop.py DB [--width 0.01] [--after 2] [--clean-only] [--within] [--json]

`--clean-only` keeps the cases none of whose visits the sentinel found slowed (the database stores
how many visits were slowed, not which). Exit status 0; the table is printed (`--json`: as JSON).
"""

import argparse
import json
import sqlite3
import sys

BINS = [(0, 10), (10, 100), (100, 1000), (1000, 10000), (10000, float("inf"))]


def label(lo, hi):
    def us(v):
        return f"{v / 1000:g} ms" if v >= 1000 else f"{v:g} us"

    return f">= {us(lo)}" if hi == float("inf") else f"{us(lo)}-{us(hi)}"


def tally():
    return {"cases": 0, "stopped": 0, "visits": 0, "visits_saved": 0, "time": 0.0, "time_saved": 0.0,
            "raised_w": 0, "raised_2pct": 0}


def across_visits(visits, calls, width, after, t):
    readings = [min(v) for v in visits]
    t["cases"] += 1
    t["visits"] += len(readings)
    t["time"] += calls * sum(sum(v) for v in visits)
    first = sorted(readings[:after])
    if len(first) < 2 or first[1] > first[0] * (1 + width):
        return
    t["stopped"] += 1
    t["visits_saved"] += len(readings) - after
    t["time_saved"] += calls * sum(sum(v) for v in visits[after:])
    final = min(readings)
    t["raised_w"] += first[0] > final * (1 + width)
    t["raised_2pct"] += first[0] > final * 1.02


def within_visit(visits, calls, width, t):
    for v in visits:
        if len(v) < 3:
            continue
        t["cases"] += 1
        t["visits"] += len(v)
        t["time"] += calls * sum(v)
        a, b = sorted(v[:2])
        if b > a * (1 + width):
            continue
        t["stopped"] += 1
        t["visits_saved"] += len(v) - 2
        t["time_saved"] += calls * sum(v[2:])
        t["raised_w"] += a > min(v) * (1 + width)
        t["raised_2pct"] += a > min(v) * 1.02


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--width", type=float, default=0.01, help="relative width W (default 0.01)")
    ap.add_argument("--after", type=int, default=2, help="visits K before the rule may stop (default 2)")
    ap.add_argument("--clean-only", action="store_true", help="only cases with no slowed visit")
    ap.add_argument("--within", action="store_true", help="the rule on one visit's repetitions instead")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.after < 2:
        sys.exit("confidence_stop.py: --after must be at least 2 (two readings to agree)")
    con = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    sql = ("SELECT samples_us, min_us, iterations, repetitions FROM measurements WHERE status = 'passed' "
           "AND samples_us IS NOT NULL AND superseded = 0" + (" AND coalesce(slowed, 0) = 0" if a.clean_only else ""))
    bins = {b: tally() for b in BINS}
    lowest_at = {}  # visits -> [count of cases whose lowest reading came at visit i]
    for samples, min_us, iterations, repetitions in con.execute(sql):
        visits = [v for v in json.loads(samples) if v]
        if 3 <= len(visits) <= 5:
            readings = [min(v) for v in visits]
            lowest_at.setdefault(len(visits), [0] * len(visits))[readings.index(min(readings))] += 1
        if min_us is None or (not a.within and len(visits) <= a.after):
            continue
        calls = (iterations or 0) / repetitions if repetitions else 1.0
        b = next(b for b in BINS if b[0] <= min_us < b[1])
        if a.within:
            within_visit(visits, calls, a.width, bins[b])
        else:
            across_visits(visits, calls, a.width, a.after, bins[b])
    rows = []
    for (lo, hi), t in bins.items():
        if not t["cases"]:
            continue
        s = max(t["stopped"], 1)
        rows.append({"time": label(lo, hi), "cases": t["cases"], "stopped": t["stopped"] / t["cases"],
                     "visits_saved": t["visits_saved"] / t["visits"], "time_saved": t["time_saved"] / t["time"],
                     "raised_over_width": t["raised_w"] / s, "raised_over_2pct": t["raised_2pct"] / s})
    unit = "visits (repetitions)" if a.within else f"cases with more than {a.after} visits"
    if a.json:
        print(json.dumps({"db": a.db, "width": a.width, "after": a.after, "within": a.within,
                          "clean_only": a.clean_only, "rows": rows, "lowest_at_visit": lowest_at}, indent=1))
        return
    print(f"{a.db}: stop {'a visit after 2 repetitions' if a.within else f'after {a.after} visits'} "
          f"when the two lowest agree within {a.width:.1%}; rows count {unit}")
    print(f"{'case time':>14} {'n':>7} {'stopped':>8} {'saved':>7} {'time':>7} {'raised>W':>9} {'raised>2%':>10}")
    for r in rows:
        print(f"{r['time']:>14} {r['cases']:>7} {r['stopped']:>8.1%} {r['visits_saved']:>7.1%} "
              f"{r['time_saved']:>7.1%} {r['raised_over_width']:>9.1%} {r['raised_over_2pct']:>10.1%}")
    for n, counts in sorted(lowest_at.items()):
        print(f"cases with {n} visits: lowest reading at visit 1..{n}: {', '.join(str(c) for c in counts)}")


if __name__ == "__main__":
    main()
