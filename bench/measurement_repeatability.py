#!/usr/bin/env python3
"""The measurement method's own benchmark: do two back-to-back runs agree?

Runs `floorline bench` twice on the same models into two fresh databases (batch 1, 1 thread by
default: resnet18, mobilenet_v2, squeezenet1_1 from models/zoo), then compares them case by case:
the share of cases passed in both whose medians (and whose minima, the per-case time S takes) are
within 5% of each other, the median and p90 of the relative differences, by layer kind; and per
model the bound S of each run (`floorline analyze --format json`) and their relative difference.

    bench/measurement_repeatability.py --floorline build/bin/floorline [--out DIR] [-- BENCH ARGS...]

Arguments after `--` go to both `floorline bench` runs (e.g. `--passes 1 --repetitions 5`), so that
two settings of the method can be compared on the same machine. The figures are only as quiet as
the machine: say what else ran. Exit status 0; the report is printed and written to DIR/report.json.
"""

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1"]


def bench(floorline, models, db, extra):
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    cmd = [floorline, "bench", *models, "--db", str(db), "--batch", "1", "--threads", "1", "--quiet",
           "--no-calibrate", *extra]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def cases(db):
    con = sqlite3.connect(db)
    cols = {r[1] for r in con.execute("PRAGMA table_info(measurements)")}
    has_min = "min_us" in cols
    rows = con.execute(
        "SELECT c.name, lc.kind, m.median_us, " + ("m.min_us" if has_min else "m.median_us") +
        " FROM measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
        "WHERE m.status = 'passed' AND m.superseded = 0").fetchall()
    con.close()
    return {name: (kind, median, minimum) for name, kind, median, minimum in rows}


def bounds(floorline, models, db):
    out = subprocess.run([floorline, "analyze", *models, "--db", str(db), "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return {m["model"]: m for m in json.loads(out)["models"]}


def quantile(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def rel(a, b):
    return abs(a - b) / min(a, b) if min(a, b) > 0 else float("inf")


def two_run_args(doc, default_models, default_out):
    """The command line of a script that benches the same models twice (this one, race_agreement.py):
    its arguments, the model files (zoo names resolved), the arguments after `--` for both runs, and
    the output folder (created)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--floorline", default=str(ROOT / "build/bin/floorline"))
    ap.add_argument("--models", nargs="+", default=default_models, help="zoo names or ONNX files")
    ap.add_argument("--out", default=default_out)
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    extra = [x for x in a.bench_args if x != "--"]
    models = [m if m.endswith(".onnx") else str(ROOT / "models/zoo" / (m + ".onnx")) for m in a.models]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    return a, models, extra, out


def main():
    a, models, extra, out = two_run_args(__doc__, DEFAULT_MODELS, "floorline-repeatability")
    dbs = [out / "run1.db", out / "run2.db"]
    walls = []
    for db in dbs:
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        walls.append(bench(a.floorline, models, db, extra))
    c1, c2 = cases(dbs[0]), cases(dbs[1])
    common = sorted(set(c1) & set(c2))
    med = [rel(c1[n][1], c2[n][1]) for n in common]
    mins = [rel(c1[n][2], c2[n][2]) for n in common]
    by_kind = {}
    for n, d in zip(common, med):
        by_kind.setdefault(c1[n][0], []).append(d)
    b1, b2 = bounds(a.floorline, models, dbs[0]), bounds(a.floorline, models, dbs[1])
    per_model = {}
    for m in sorted(set(b1) & set(b2)):
        s1, s2 = b1[m]["S_us"], b2[m]["S_us"]
        per_model[m] = {"S1_us": s1, "S2_us": s2, "S_difference": rel(s1, s2),
                        "S_ci_hi_us": [b1[m].get("S_ci_hi_us"), b2[m].get("S_ci_hi_us")]}
    report = {
        "floorline": a.floorline,
        "bench_args": extra,
        "models": a.models,
        "wall_seconds": walls,
        "cases_compared": len(common),
        "median_within_5pct": sum(d <= 0.05 for d in med) / len(med) if med else 0,
        "median_difference_p50": quantile(med, 0.5),
        "median_difference_p90": quantile(med, 0.9),
        "min_within_5pct": sum(d <= 0.05 for d in mins) / len(mins) if mins else 0,
        "min_difference_p90": quantile(mins, 0.9),
        "by_kind": {k: {"cases": len(v), "within_5pct": sum(d <= 0.05 for d in v) / len(v),
                        "median_difference": quantile(v, 0.5)} for k, v in sorted(by_kind.items())},
        "models_S": per_model,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"{len(common)} cases passed in both runs (wall {walls[0]:.0f} s, {walls[1]:.0f} s)")
    print(f"medians within 5%: {100 * report['median_within_5pct']:.1f}% "
          f"(difference p50 {100 * report['median_difference_p50']:.1f}%, "
          f"p90 {100 * report['median_difference_p90']:.1f}%)")
    print(f"minima within 5%:  {100 * report['min_within_5pct']:.1f}% "
          f"(difference p90 {100 * report['min_difference_p90']:.1f}%)")
    for k, v in report["by_kind"].items():
        print(f"  {k:<22} {v['cases']:4d} cases, {100 * v['within_5pct']:5.1f}% within 5%, "
              f"median difference {100 * v['median_difference']:.1f}%")
    for m, v in per_model.items():
        print(f"S {m:<16} {v['S1_us']:10.1f} us vs {v['S2_us']:10.1f} us: {100 * v['S_difference']:.1f}% apart")
    return 0


if __name__ == "__main__":
    sys.exit(main())
