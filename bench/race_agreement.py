#!/usr/bin/env python3
"""Does racing find the same best case as timing every candidate in full?

Runs `floorline bench` on the same models into two fresh databases, one after the other: the
exhaustive run (`--all-impls --no-race`: every implementation, the fused variants' too, each with
the full method) and the raced default (`--all-impls`: the same candidates, raced;
docs/MEASUREMENT.md, "Racing"). Then compares them: per race group (configuration, data type, math
mode, fusion), whether both picked the same winning case, and where not, both winners and their
times; per model, S from `floorline analyze` in each; and each run's bench wall time and how many
candidates the raced run dropped. Batch 1, 1 thread by default (resnet18, mobilenet_v2,
squeezenet1_1, bert_base_encoder, vit_b_16: the issue's set).

    bench/race_agreement.py --floorline build/bin/floorline [--models NAME...] [--out DIR] [--ceiling] [-- BENCH ARGS...]

Arguments after `--` go to both runs (e.g. `--backend onednn`). The raced run goes second, so that
a drift of the machine favours neither systematically less than the order does: run it twice in
both orders where it matters, and say what else ran. Exit status 0; the report is printed and
written to DIR/report.json.

With `--ceiling`, a second exhaustive run follows the raced one, and the report adds what the
method itself repeats to: the two exhaustive runs' agreement on winners and S, the same measure as
raced against exhaustive. A raced run cannot agree with an exhaustive one better than two
exhaustive runs agree with each other; the groups where the raced winner differs from both
exhaustive runs' are the ones racing may have changed.
"""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from measurement_repeatability import bench, two_run_args

DEFAULT_MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "bert_base_encoder", "vit_b_16"]


def winners(db):
    """(key, dtype, math_mode, fusion) -> (case name, its time), from best_cases."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute("SELECT key, dtype, math_mode, fusion, case_name, coalesce(min_us, median_us) "
                       "FROM best_cases").fetchall()
    raced = con.execute("SELECT count(*) FROM measurements WHERE superseded = 0 AND reason LIKE 'raced out:%'"
                        ).fetchone()[0]
    passed = dict(con.execute("SELECT case_name, coalesce(min_us, median_us) FROM current_measurements "
                              "WHERE status = 'passed'").fetchall())
    con.close()
    return {tuple(r[:4]): (r[4], r[5]) for r in rows}, raced, passed


def compare(a, b, all_a):
    """The groups two runs' winners (`winners`) share, and those whose winning cases differ, each
    with both winners' times and the second winner's time in the first run (`all_a`)."""
    groups = sorted(set(a) & set(b))
    differ = [{"group": "/".join(g), "first": a[g][0], "first_us": a[g][1], "second": b[g][0], "second_us": b[g][1],
               "second_winner_in_first_us": all_a.get(b[g][0])}
              for g in groups if a[g][0] != b[g][0]]
    return groups, differ


def bounds(floorline, models, db):
    out = subprocess.run([floorline, "analyze", *models, "--db", str(db), "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return {m["model"]: m["S_us"] for m in json.loads(out)["models"]}


def main():
    ceiling = "--ceiling" in sys.argv
    if ceiling:
        sys.argv.remove("--ceiling")
    a, models, extra, out = two_run_args(__doc__, DEFAULT_MODELS, "floorline-race-agreement")
    runs = {"exhaustive": (out / "exhaustive.db", ["--all-impls", "--no-race"]),
            "raced": (out / "raced.db", ["--all-impls"])}
    if ceiling:
        runs["exhaustive2"] = (out / "exhaustive2.db", ["--all-impls", "--no-race"])
    walls = {}
    for name, (db, flags) in runs.items():
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        walls[name] = bench(a.floorline, models, db, flags + extra)
    (w_ex, _, all_ex), (w_rc, raced_out, _) = winners(runs["exhaustive"][0]), winners(runs["raced"][0])
    groups, differ = compare(w_ex, w_rc, all_ex)
    s_ex, s_rc = bounds(a.floorline, models, runs["exhaustive"][0]), bounds(a.floorline, models, runs["raced"][0])
    per_model = {m: {"S_exhaustive_us": s_ex[m], "S_raced_us": s_rc[m], "raced_over_exhaustive": s_rc[m] / s_ex[m]}
                 for m in sorted(set(s_ex) & set(s_rc)) if s_ex[m] and s_rc[m]}
    report = {"floorline": a.floorline, "bench_args": extra, "models": a.models, "wall_seconds": walls,
              "raced_out": raced_out, "groups": len(groups),
              "same_winner": (len(groups) - len(differ)) / len(groups) if groups else 0,
              "differing": [{"group": d["group"], "exhaustive": d["first"], "exhaustive_us": d["first_us"],
                             "raced": d["second"], "raced_us": d["second_us"],
                             "raced_winner_in_exhaustive_us": d["second_winner_in_first_us"]} for d in differ],
              "models_S": per_model}
    if ceiling:
        w_ex2, _, _ = winners(runs["exhaustive2"][0])
        groups2, differ2 = compare(w_ex, w_ex2, all_ex)
        s_ex2 = bounds(a.floorline, models, runs["exhaustive2"][0])
        # Groups where the raced winner is neither exhaustive run's: what racing may have changed.
        beyond = [d for d in differ if tuple(d["group"].split("/")) in w_ex2 and
                  w_ex2[tuple(d["group"].split("/"))][0] != d["second"]]
        report["ceiling"] = {
            "groups": len(groups2),
            "same_winner": (len(groups2) - len(differ2)) / len(groups2) if groups2 else 0,
            "differing": differ2,
            "raced_winner_in_neither": [d["group"] for d in beyond],
            "models_S": {m: {"S_exhaustive_us": s_ex[m], "S_exhaustive2_us": s_ex2[m],
                             "S_raced_us": s_rc.get(m), "exhaustive2_over_exhaustive": s_ex2[m] / s_ex[m]}
                         for m in sorted(set(s_ex) & set(s_ex2)) if s_ex[m] and s_ex2[m]}}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"bench wall: exhaustive {walls['exhaustive']:.0f} s, raced {walls['raced']:.0f} s "
          f"({walls['raced'] / walls['exhaustive']:.0%}); {raced_out} raced out")
    print(f"same winning case in {len(groups) - len(differ)} of {len(groups)} groups "
          f"({100 * report['same_winner']:.1f}%)")
    for d in differ:
        print(f"  {d['group'][:90]}: exhaustive {d['first']} {d['first_us']:.2f} us, "
              f"raced {d['second']} {d['second_us']:.2f} us (exhaustive: "
              f"{'-' if d['second_winner_in_first_us'] is None else format(d['second_winner_in_first_us'], '.2f')} us)")
    for m, v in per_model.items():
        print(f"S {m:<20} exhaustive {v['S_exhaustive_us']:10.1f} us, raced {v['S_raced_us']:10.1f} us "
              f"({100 * (v['raced_over_exhaustive'] - 1):+.1f}%)")
    if ceiling:
        c = report["ceiling"]
        print(f"ceiling: a second exhaustive run ({walls['exhaustive2']:.0f} s) picked the first's winning case in "
              f"{c['groups'] - len(c['differing'])} of {c['groups']} groups ({100 * c['same_winner']:.1f}%); "
              f"the raced winner is neither exhaustive run's in {len(c['raced_winner_in_neither'])} group(s)")
        for m, v in c["models_S"].items():
            print(f"S {m:<20} exhaustive {v['S_exhaustive_us']:10.1f} us, again {v['S_exhaustive2_us']:10.1f} us "
                  f"({100 * (v['exhaustive2_over_exhaustive'] - 1):+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
