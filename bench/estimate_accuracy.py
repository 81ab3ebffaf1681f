#!/usr/bin/env python3
"""How close is the composed estimate E to the replay? A table from a database.

E (docs/ANALYZER.md, "The estimate E") predicts a pass over a model's graph from the database
alone: the cases S takes, their cache-state readings, the conversions between them and the
activations a pass finds beyond the private cache. The replay runs the same cases as the graph.
This script asks `floorline analyze` for both (CSV) and prints, per model and batch, S, E, the
replay as timed (the target) and the replay at S's host state (the paired measure: the pass over
its layers alone in the same moments, times Σ the cases' bench times; what the host's load during
the replay added is left out, which E cannot know, and so is what single calls cost over the
bench's repeated ones, which E counts since 2026-12-07: a diagnostic, not the target), their
ratios, and a summary: for how many models |E − replay| / replay is within 5% and within 10%,
against both, and the median ratios.

    bench/estimate_accuracy.py --floorline BIN --db DB [--batch 1] [--models M1,M2] [--json]

Models: every model of the database's replays at that batch (found in models/zoo), or --models.
Exit status 0; 1 where the analysis fails or no model is found.
"""

import argparse
import csv
import io
import json
import os
import sqlite3
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def within(ratio, share):
    # |E - replay| / replay <= share, with ratio = replay / E.
    return abs(1 - 1 / ratio) <= share


def analyze_rows(floorline, db, batch, files, need_replay=True):
    """`floorline analyze FILES --db DB --batch B --format csv`, one dict per model with S, E, the
    replay and their ratios; None (and the error on stderr) where the analysis fails."""
    run = subprocess.run([floorline, "analyze", *files, "--db", db, "--batch", str(batch), "--format", "csv"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return None
    rows = []
    for r in csv.DictReader(io.StringIO(run.stdout)):
        def num(k):
            v = r.get(k, "")
            return float(v) if v not in ("", "-") else None
        S, E, replay, paired = num("S_us"), num("E_us"), num("replay_us"), num("replay_paired_us")
        if not (S and E and (replay or not need_replay)):
            continue
        rows.append({"model": r["model"], "batch": int(r["batch"]), "S_us": S, "E_us": E,
                     "E_activations_us": num("E_activations_us"),
                     "replay_us": replay, "replay_paired_us": paired, "E_over_S": E / S,
                     "replay_over_E": replay / E if replay else None,
                     "replay_paired_over_E": paired / E if paired else None})
    return rows


def summary(rows, key):
    """How many of `rows` have `key` (a replay / E ratio) within 5% and 10%, and its median."""
    v = [r[key] for r in rows if r[key]]
    if not v:
        return {}
    return {"models": len(v), "within_5": sum(within(x, 0.05) for x in v),
            "within_10": sum(within(x, 0.10) for x in v), "median": statistics.median(v)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--floorline", required=True, help="the floorline executable")
    ap.add_argument("--db", required=True, help="a results database with replays and cache states")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--models", default="", help="comma-separated model names (default: every replayed one)")
    ap.add_argument("--zoo", default=os.path.join(ROOT, "models", "zoo"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    if a.models:
        names = a.models.split(",")
    else:
        db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
        names = sorted({r[0] for r in db.execute("SELECT model_name FROM replays WHERE batch = ?", (a.batch,))})
    files = [os.path.join(a.zoo, n + ".onnx") for n in names if os.path.exists(os.path.join(a.zoo, n + ".onnx"))]
    if not files:
        print(f"no replayed model of batch {a.batch} found in {a.zoo}", file=sys.stderr)
        return 1
    rows = analyze_rows(a.floorline, a.db, a.batch, files)
    if rows is None:
        return 1

    out = {"batch": a.batch, "models": rows, "replay_over_E": summary(rows, "replay_over_E"),
           "replay_paired_over_E": summary(rows, "replay_paired_over_E")}
    if a.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    print(f"{'model':32s} {'S_us':>11s} {'E_us':>11s} {'replay_us':>11s} {'paired_us':>11s} "
          f"{'E/S':>5s} {'replay/E':>8s} {'paired/E':>8s}")
    for r in sorted(rows, key=lambda r: r["replay_over_E"]):
        paired = f"{r['replay_paired_us']:11.1f}" if r["replay_paired_us"] else f"{'-':>11s}"
        pe = f"{r['replay_paired_over_E']:8.3f}" if r["replay_paired_over_E"] else f"{'-':>8s}"
        print(f"{r['model']:32s} {r['S_us']:11.1f} {r['E_us']:11.1f} {r['replay_us']:11.1f} {paired} "
              f"{r['E_over_S']:5.2f} {r['replay_over_E']:8.3f} {pe}")
    for key, what in (("replay_over_E", "the replay as timed"), ("replay_paired_over_E", "the paired replay")):
        s = out[key]
        if s:
            print(f"E against {what}: within 5% in {s['within_5']} of {s['models']} models, within 10% in "
                  f"{s['within_10']}, median replay / E {s['median']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
