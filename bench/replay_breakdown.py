#!/usr/bin/python3
"""Where a replay's time goes beyond S: per model, batch and thread count of a results database.

The replay (`floorline run`/`bench --replay`) runs each model's best cases as its graph and records,
per step, its time in the graph (the minimum over the profiled passes) and its time alone, with the
causes it could name for a step over 1.5x its time alone (generator/replay.cpp, name_slow_steps).
This script splits replay - S into:
  alternatives  the cases chosen for their layouts instead of the layers' best (their time alone over
                the best's)
  conversions   the layout conversions the chosen cases need
  cold weights, cold input, cold output, thread switch, short step, after the step before, the pass
  before, unnamed
                the layer steps' time in the graph (their lowest over the profile passes) over their
                time alone, by the first cause the replay names for the step (excess_cause; replays
                stored before it name causes for the steps over 1.5x their time alone only; the last
                two named, for a slow step with none of the others, by the replay's probe of it right
                after the step before it)
  faster        steps faster in the graph than alone (negative)
  spread        the steps' median profile-pass times over their lowest (the passes' spread)
  between steps the replay (its lowest repetition mean per pass, as replay / S takes it) minus the
                sum of its steps' medians: what a pass spends between its steps, and how much
                better its best repetition ran than the steps' medians (without a stored
                steps_median_us: with the spread in it)
so that S + the parts = the replay. The totals line sums every row.

  bench/replay_breakdown.py OUT/floorline.db
  bench/replay_breakdown.py OUT/floorline.db --system 2 --models resnet50,densenet121 --csv parts.csv
"""
import argparse
import csv
import json
import sqlite3
import sys

PARTS = ["alternatives", "conversions", "cold weights", "cold input", "cold output", "thread switch",
         "short step", "after the step before", "the pass before", "unnamed", "faster", "spread",
         "between steps"]


def first_cause(cause):
    head = cause.split(";")[0].strip()
    for name in ("cold weights", "cold input", "cold output", "thread switch", "short step"):
        if head.startswith(name):
            return name
    # The replay's probe of a step with none of those (name_slow_steps: "after <step>: N us", "the
    # pass before it: N us after <step>").
    if head.startswith("after "):
        return "after the step before"
    if head.startswith("the pass before it"):
        return "the pass before"
    return "unnamed"


def breakdown(makeup, replay_us):
    parts = dict.fromkeys(PARTS, 0.0)
    parts["alternatives"] = makeup.get("alternatives_us", 0.0)
    parts["conversions"] = makeup.get("conversions_us", 0.0)
    steps_us = parts["conversions"]
    for step in makeup.get("layer_times", []):
        over = step["replay_us"] - step["case_us"]
        steps_us += step["replay_us"]
        cause = step.get("excess_cause", step.get("cause", ""))
        parts["faster" if over < 0 else first_cause(cause)] += over
    medians_us = makeup.get("steps_median_us")
    if medians_us:
        parts["spread"] = medians_us - steps_us
        steps_us = medians_us
    parts["between steps"] = replay_us - steps_us
    return parts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", help="a Floorline results database with replays")
    ap.add_argument("--system", type=int, help="only this system id")
    ap.add_argument("--models", default="", help="comma-separated model names (default: every one)")
    ap.add_argument("--csv", help="also write the rows to this CSV file")
    args = ap.parse_args()
    con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    # The replay's lowest repetition mean: the statistic replay / S is reported with.
    q = ("SELECT r.model_name, r.batch, r.system_id, s.threads, r.min_us, r.makeup FROM replays r "
         "JOIN systems s ON s.id = r.system_id")
    rows = con.execute(q + " ORDER BY r.model_name, r.batch, s.threads, r.id").fetchall()
    only = {m for m in args.models.split(",") if m}
    latest = {}
    for model, batch, system, threads, replay_us, makeup in rows:  # the latest replay of each setting
        if (args.system and system != args.system) or (only and model not in only):
            continue
        latest[(model, batch, threads, system)] = (replay_us, json.loads(makeup))
    if not latest:
        sys.exit(f"replay_breakdown: {args.db}: no replays" + (" of these models/system" if only or args.system else ""))
    short = ["alt", "conv", "cold_w", "cold_in", "cold_out", "switch", "short", "after", "pass", "unnamed",
             "faster", "spread", "between"]
    head = f"{'model':22s} {'b':>3s} {'T':>2s} {'S_ms':>8s} {'replay_ms':>9s} {'r/S':>5s} " + " ".join(
        f"{s:>8s}" for s in short)
    print("replay - S by part, ms (docstring: what each part is)")
    print(head)
    total = dict.fromkeys(PARTS, 0.0)
    total_s = total_r = 0.0
    out = []
    for (model, batch, threads, system), (replay_us, makeup) in sorted(latest.items()):
        s_us = makeup.get("cases_us", 0.0)
        parts = breakdown(makeup, replay_us)
        for k in PARTS:
            total[k] += parts[k]
        total_s += s_us
        total_r += replay_us
        ratio = replay_us / s_us if s_us > 0 else float("nan")
        print(f"{model:22s} {batch:3d} {threads:2d} {s_us / 1e3:8.2f} {replay_us / 1e3:9.2f} {ratio:5.2f} " +
              " ".join(f"{parts[k] / 1e3:8.2f}" for k in PARTS))
        out.append({"model": model, "batch": batch, "threads": threads, "system": system, "S_us": s_us,
                    "replay_us": replay_us, **{k.replace(" ", "_") + "_us": parts[k] for k in PARTS}})
    excess = total_r - total_s
    print(f"{'all':22s} {'':3s} {'':2s} {total_s / 1e3:8.2f} {total_r / 1e3:9.2f} "
          f"{total_r / total_s if total_s else float('nan'):5.2f} " + " ".join(f"{total[k] / 1e3:8.2f}" for k in PARTS))
    if excess > 0:
        print("share of replay - S: " + ", ".join(f"{k} {100 * total[k] / excess:.0f}%" for k in PARTS))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0].keys()))
            w.writeheader()
            w.writerows(out)


if __name__ == "__main__":
    main()
