#!/usr/bin/env python3
"""E for models never run: hold models out of a database, bench only what they lack, estimate them.

The composed estimate E (docs/ANALYZER.md, "The estimate E") is meant for a model made of measured
configurations: estimated from the database, without running it. This script checks that on a
database where the models were run: it copies the database, takes the held-out models out of the
copy (their model rows, layers, replays and runtime latencies) together with every measurement and
cache-state reading of the cases only they need (those no other replayed model's plan holds at that
batch: their own configurations, fused variants and conversions), then does what a user with a new
model does: `floorline bench HELD --cache-states` times what the copy lacks, and `floorline analyze
HELD` estimates them. Their E is compared with the replays the original database holds, as
bench/estimate_accuracy.py compares E for the models that were run (printed beside it).

    bench/estimate_unseen.py --floorline BIN --db DB [--held-out M1,M2,...] [--batch 1] [--work DIR]
                             [--bench-args '--threads 2']

The bench of what the held-out models lack runs at `floorline bench`'s defaults plus --bench-args:
give it the options the database's run had (scripts/run-zoo's are the defaults).

The original database is only read. Exit status 0; 1 where a step fails.
"""

import argparse
import csv
import io
import os
import shlex
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from estimate_accuracy import ROOT, analyze_rows, summary  # noqa: E402

# Two made only of configurations the rest of the zoo has (resnet34's are resnet18's, resnet101's
# resnet50's), three with their own (at batch 1 on a CPU: lraspp_mobilenet_v3_large 158 of its
# 1,821 cases in no other model's plan, mnasnet1_0 270 of 1,107, swin_t 958 of 1,283).
DEFAULT_HELD_OUT = "resnet34,resnet101,mnasnet1_0,lraspp_mobilenet_v3_large,swin_t"


# The best case per (config, system, dtype, math mode, fusion): the lowest min_us of the passed,
# current, non-conversion measurements (benchdb/src/schema.cpp, kRebuildBest).
REBUILD_BEST = """
INSERT INTO best_measurements (config_id, system_id, dtype, math_mode, fusion, measurement_id, case_id, median_us,
                               min_us)
SELECT c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion, m.id, m.case_id, m.median_us,
       MIN(coalesce(m.min_us, m.median_us))
FROM measurements m JOIN cases c ON c.id = m.case_id
WHERE m.status = 'passed' AND m.superseded = 0 AND m.median_us IS NOT NULL AND c.conversion_tensor = ''
GROUP BY c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion"""


def plan_cases(floorline, files, batch):
    """The names of every case `floorline plan FILES --batch B` holds (timed or not)."""
    run = subprocess.run([floorline, "plan", *files, "--batch", str(batch), "--list", "--format", "csv"],
                         capture_output=True, text=True, check=True)
    return {r["case"] for r in csv.DictReader(io.StringIO(run.stdout))}


def take_out(db, held, lacking):
    """Deletes from `db` the held-out models and every reading of the cases in `lacking`."""
    db.execute("CREATE TEMP TABLE held (name TEXT PRIMARY KEY)")
    db.executemany("INSERT INTO held VALUES (?)", [(n,) for n in held])
    db.execute("CREATE TEMP TABLE lacking (name TEXT PRIMARY KEY)")
    db.executemany("INSERT INTO lacking VALUES (?)", [(n,) for n in lacking])
    db.execute("CREATE TEMP TABLE lacking_ids AS SELECT id FROM cases WHERE name IN (SELECT name FROM lacking)")
    counts = {}
    for table, where in (
            ("replays", "model_name IN (SELECT name FROM held)"),
            ("framework_latencies", "model_name IN (SELECT name FROM held)"),
            ("framework_layer_times", "model_name IN (SELECT name FROM held)"),
            ("model_layers", "model_id IN (SELECT id FROM models WHERE name IN (SELECT name FROM held))"),
            ("models", "name IN (SELECT name FROM held)"),
            ("cache_times", "case_id IN (SELECT id FROM lacking_ids)"),
            ("best_measurements", "case_id IN (SELECT id FROM lacking_ids)"),
            ("measurements", "case_id IN (SELECT id FROM lacking_ids)")):
        counts[table] = db.execute(f"DELETE FROM {table} WHERE {where}").rowcount
    # Each config's best again from what is left (benchdb/src/schema.cpp, kRebuildBest): a group whose
    # best was a deleted case keeps its fastest remaining one, as the bench would have chosen.
    db.execute("DELETE FROM best_measurements")
    db.execute(REBUILD_BEST)
    db.commit()
    return counts


def leaked(db, held_configs):
    """Readings left in `db` of the configurations only the held-out models have (none expected)."""
    n = 0
    for i in range(0, len(held_configs), 400):
        chunk = held_configs[i:i + 400]
        q = ",".join("?" * len(chunk))
        n += db.execute(f"SELECT (SELECT count(*) FROM best_measurements WHERE config_id IN ({q})) + "
                        f"(SELECT count(*) FROM cache_times t JOIN cases c ON c.id = t.case_id "
                        f"WHERE c.config_id IN ({q}))", chunk * 2).fetchone()[0]
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--floorline", required=True, help="the floorline executable")
    ap.add_argument("--db", required=True, help="a database with replays and cache states at --batch")
    ap.add_argument("--held-out", default=DEFAULT_HELD_OUT, help="comma-separated model names")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--work", default="estimate-unseen", help="folder for the copy (made if missing)")
    ap.add_argument("--zoo", default=os.path.join(ROOT, "models", "zoo"))
    ap.add_argument("--bench-args", default="",
                    help="more arguments for `floorline bench` (the run's own: e.g. --threads 2), quoted as one")
    a = ap.parse_args()

    def model_file(name):
        return os.path.join(a.zoo, name + ".onnx")

    src = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    replayed = sorted({r[0] for r in src.execute("SELECT model_name FROM replays WHERE batch = ?", (a.batch,))})
    held = a.held_out.split(",")
    missing = [n for n in held if n not in replayed or not os.path.exists(model_file(n))]
    if missing:
        print(f"{a.db}: no replay at batch {a.batch} (or no file in {a.zoo}) for {', '.join(missing)}",
              file=sys.stderr)
        return 1
    others = [n for n in replayed if n not in held and os.path.exists(model_file(n))]
    if not others:
        print(f"{a.db}: every replayed model of batch {a.batch} is held out: nothing to estimate them from",
              file=sys.stderr)
        return 1

    os.makedirs(a.work, exist_ok=True)
    copy = os.path.join(a.work, "unseen.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(copy + suffix):
            os.remove(copy + suffix)
    dst = sqlite3.connect(copy)
    src.backup(dst)

    held_files = [model_file(n) for n in held]
    held_cases = plan_cases(a.floorline, held_files, a.batch)
    other_cases = plan_cases(a.floorline, [model_file(n) for n in others], a.batch)
    lacking = held_cases - other_cases
    counts = take_out(dst, held, lacking)
    # The configurations only the held-out models have: nothing of theirs may be left to E.
    names = sorted(held_cases)
    own = set()
    for i in range(0, len(names), 500):
        chunk = names[i:i + 500]
        own |= {r[0] for r in dst.execute(
            f"SELECT config_id FROM cases WHERE name IN ({','.join('?' * len(chunk))})", chunk)}
    shared = set()
    other_names = sorted(other_cases)
    for i in range(0, len(other_names), 500):
        chunk = other_names[i:i + 500]
        shared |= {r[0] for r in dst.execute(
            f"SELECT config_id FROM cases WHERE name IN ({','.join('?' * len(chunk))})", chunk)}
    left = leaked(dst, sorted(own - shared))
    dst.close()
    if left:
        print(f"{copy}: {left} reading(s) of the held-out models' own configurations left after taking them "
              "out (a database written with other case names?)", file=sys.stderr)
        return 1
    print(f"held out {len(held)} model(s) of {len(replayed)}: {', '.join(held)}; their plan: {len(held_cases)} "
          f"case(s), {len(lacking)} in no other model's plan; removed from the copy: "
          + ", ".join(f"{v} {k}" for k, v in counts.items()))

    t0 = time.monotonic()
    bench = subprocess.run([a.floorline, "bench", *held_files, "--db", copy, "--batch", str(a.batch),
                            "--cache-states", *shlex.split(a.bench_args)], capture_output=True, text=True)
    if bench.returncode != 0:
        print(bench.stderr, file=sys.stderr)
        return 1
    print(f"bench of what they lack: {time.monotonic() - t0:.0f} s")
    for line in bench.stderr.splitlines():
        if "passed," in line or "cache states:" in line:
            print("  " + line.strip())

    unseen = analyze_rows(a.floorline, copy, a.batch, held_files, need_replay=False)
    run = analyze_rows(a.floorline, a.db, a.batch, held_files)
    if unseen is None or run is None:
        return 1
    e_unseen = {r["model"]: r["E_us"] for r in unseen}
    rows = []
    for r in run:
        if r["model"] not in e_unseen:
            continue
        e = e_unseen[r["model"]]
        rows.append({"model": r["model"], "S_us": r["S_us"], "E_run_us": r["E_us"], "E_us": e,
                     "replay_us": r["replay_us"], "replay_paired_us": r["replay_paired_us"],
                     "replay_over_E": r["replay_us"] / e,
                     "replay_paired_over_E": r["replay_paired_us"] / e if r["replay_paired_us"] else None,
                     "run_replay_over_E": r["replay_over_E"], "run_replay_paired_over_E": r["replay_paired_over_E"]})
    print(f"\n{'model':24s} {'S_us':>10s} {'E_run_us':>10s} {'E_unseen':>10s} {'replay_us':>10s} "
          f"{'paired_us':>10s} {'replay/E':>8s} {'paired/E':>8s}")
    for r in rows:
        pe = f"{r['replay_paired_over_E']:8.3f}" if r["replay_paired_over_E"] else f"{'-':>8s}"
        print(f"{r['model']:24s} {r['S_us']:10.1f} {r['E_run_us']:10.1f} {r['E_us']:10.1f} {r['replay_us']:10.1f} "
              f"{r['replay_paired_us'] or 0:10.1f} {r['replay_over_E']:8.3f} {pe}")
    for key, what in (("replay_over_E", "the replay as timed"), ("replay_paired_over_E", "the paired replay")):
        s, s_run = summary(rows, key), summary(rows, "run_" + key)
        if s:
            print(f"E unseen against {what}: within 5% in {s['within_5']} of {s['models']}, within 10% in "
                  f"{s['within_10']}, median {s['median']:.3f} (E of the run: {s_run['within_5']}, "
                  f"{s_run['within_10']}, {s_run['median']:.3f})")
    return 0 if len(rows) == len(held) else 1


if __name__ == "__main__":
    sys.exit(main())
