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

    bench/race_agreement.py --floorline build/bin/floorline [--models NAME...] [--out DIR] [-- BENCH ARGS...]

Arguments after `--` go to both runs (e.g. `--backend onednn`). The raced run goes second, so that
a drift of the machine favours neither systematically less than the order does: run it twice in
both orders where it matters, and say what else ran. Exit status 0; the report is printed and
written to DIR/report.json.
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


def bounds(floorline, models, db):
    out = subprocess.run([floorline, "analyze", *models, "--db", str(db), "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return {m["model"]: m["S_us"] for m in json.loads(out)["models"]}


def main():
    a, models, extra, out = two_run_args(__doc__, DEFAULT_MODELS, "floorline-race-agreement")
    runs = {"exhaustive": (out / "exhaustive.db", ["--all-impls", "--no-race"]),
            "raced": (out / "raced.db", ["--all-impls"])}
    walls = {}
    for name, (db, flags) in runs.items():
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        walls[name] = bench(a.floorline, models, db, flags + extra)
    (w_ex, _, all_ex), (w_rc, raced_out, _) = winners(runs["exhaustive"][0]), winners(runs["raced"][0])
    groups = sorted(set(w_ex) & set(w_rc))
    differ = [{"group": "/".join(g), "exhaustive": w_ex[g][0], "exhaustive_us": w_ex[g][1],
               "raced": w_rc[g][0], "raced_us": w_rc[g][1],
               "raced_winner_in_exhaustive_us": all_ex.get(w_rc[g][0])}
              for g in groups if w_ex[g][0] != w_rc[g][0]]
    s_ex, s_rc = bounds(a.floorline, models, runs["exhaustive"][0]), bounds(a.floorline, models, runs["raced"][0])
    per_model = {m: {"S_exhaustive_us": s_ex[m], "S_raced_us": s_rc[m], "raced_over_exhaustive": s_rc[m] / s_ex[m]}
                 for m in sorted(set(s_ex) & set(s_rc)) if s_ex[m] and s_rc[m]}
    report = {"floorline": a.floorline, "bench_args": extra, "models": a.models, "wall_seconds": walls,
              "raced_out": raced_out, "groups": len(groups),
              "same_winner": (len(groups) - len(differ)) / len(groups) if groups else 0,
              "differing": differ, "models_S": per_model}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"bench wall: exhaustive {walls['exhaustive']:.0f} s, raced {walls['raced']:.0f} s "
          f"({walls['raced'] / walls['exhaustive']:.0%}); {raced_out} raced out")
    print(f"same winning case in {len(groups) - len(differ)} of {len(groups)} groups "
          f"({100 * report['same_winner']:.1f}%)")
    for d in differ:
        print(f"  {d['group'][:90]}: exhaustive {d['exhaustive']} {d['exhaustive_us']:.2f} us, "
              f"raced {d['raced']} {d['raced_us']:.2f} us (exhaustive: "
              f"{'-' if d['raced_winner_in_exhaustive_us'] is None else format(d['raced_winner_in_exhaustive_us'], '.2f')} us)")
    for m, v in per_model.items():
        print(f"S {m:<20} exhaustive {v['S_exhaustive_us']:10.1f} us, raced {v['S_raced_us']:10.1f} us "
              f"({100 * (v['raced_over_exhaustive'] - 1):+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
