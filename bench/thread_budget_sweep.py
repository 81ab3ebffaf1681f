#!/usr/bin/env python3
"""Do the bounds hold at every batch size and thread count? The validity sweep of the thread budget.

Runs `floorline run` on the models at each thread budget (default 1 and 2) with every batch size
(default 1 and 8) into one database, so that a budget of 2 reuses what the budget of 1 measured
(each thread count is its own system: docs/ANALYZER.md "Thread budget"); each run replays the models
at its budget and times ONNX Runtime at the same batch and thread count (intra-op threads = T,
inter-op 1). Then it prints, per (batch, threads), the validity table: S, the replay and ONNX
Runtime's faster setting (optimization level all or disabled) per model, whether S <= ORT and
S <= replay, the thinnest margin, replay / S and the paired replay over S (the replay at the host's
state when S was timed: docs/MEASUREMENT.md, "The paired replay"); and per model S at 2 threads
against S at 1.

    bench/thread_budget_sweep.py --floorline build/bin/floorline [--models resnet18,gru_kws]
                                 [--batch 1,8] [--threads 1,2] [--out DIR] [-- RUN ARGS...]
    bench/thread_budget_sweep.py --from-reports 1=DIR1/report.json,2=DIR2/report.json

`--from-reports T=FILE,...` prints the table of reports that runs already wrote (each FILE the
report.json of a `floorline run` at T threads: e.g. a budget of 2 run at batch 1 only), running
nothing. Each run's report is also kept as DIR/report_t<T>.json.

Models are names in models/zoo (default: the ten of the thread-budget issue's table). Arguments after
`--` go to every `floorline run` (e.g. `--quick`). The figures are only as quiet as the machine:
say what else ran. The report is printed and written to DIR/sweep.json; exit status 1 when a bound
does not hold somewhere.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = ["bert_base_encoder", "convnext_tiny", "densenet121", "mnasnet1_0", "lstm_lm", "vit_b_16",
                  "squeezenet1_1", "efficientnet_b0", "resnet50", "gru_kws"]


def run(floorline, models, out, db, batches, threads, extra):
    cmd = [floorline, "run", *models, "--out", str(out), "--db", str(db), "--batch", batches, "--threads",
           str(threads), "--quiet", *extra]
    t0 = time.monotonic()
    with open(out / f"run_t{threads}.log", "w") as log:
        subprocess.run(cmd, check=False, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    return time.monotonic() - t0


def rows_of(report, threads):
    rows = []
    for m in report["models"]:
        ort = [f for f in m.get("framework", []) if f.get("runtime") == "onnxruntime"]
        best = min((f["us"] for f in ort), default=None)
        rows.append({"model": m["model"], "batch": m["batch"], "threads": threads, "S_us": m["S_us"],
                     "replay_us": m.get("replay_us"), "replay_paired_us": m.get("replay_paired_us"),
                     "ort_us": best})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--floorline", default=str(ROOT / "build/bin/floorline"))
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default=str(ROOT / "floorline-out/thread-budget"))
    ap.add_argument("--from-reports", default="", help="T=REPORT.json,...: print their table, run nothing")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    out = Path(a.out)
    rows, seconds = [], {}
    if a.from_reports:
        for item in a.from_reports.split(","):
            t, path = item.split("=", 1)
            rows += rows_of(json.loads(Path(path).read_text()), int(t))
        a.threads = ",".join(sorted({item.split("=", 1)[0] for item in a.from_reports.split(",")}))
    else:
        out.mkdir(parents=True, exist_ok=True)
        models = [str(ROOT / "models/zoo" / f"{n}.onnx") for n in a.models.split(",")]
        db = out / "floorline.db"
        for t in sorted(int(x) for x in a.threads.split(",")):
            seconds[t] = run(a.floorline, models, out, db, a.batch, t, a.extra)
            text = (out / "report.json").read_text()
            (out / f"report_t{t}.json").write_text(text)
            rows += rows_of(json.loads(text), t)
    bad = 0
    print(f"{'model':26} {'b':>3} {'T':>2} {'S ms':>9} {'replay ms':>10} {'ORT ms':>9} {'S<=ORT':>7} "
          f"{'S<=replay':>9} {'replay/S':>8} {'paired/S':>8}")
    for r in sorted(rows, key=lambda r: (r["batch"], r["threads"], r["model"])):
        s, rp, o = r["S_us"], r["replay_us"], r["ort_us"]
        ok_ort = o is None or s <= o
        ok_rp = rp is None or s <= rp
        bad += (not ok_ort) + (not ok_rp)
        fmt = lambda v: f"{v / 1000:.2f}" if v is not None else "-"
        print(f"{r['model']:26} {r['batch']:>3} {r['threads']:>2} {fmt(s):>9} {fmt(rp):>10} {fmt(o):>9} "
              f"{('yes' if ok_ort else 'NO'):>7} {('yes' if ok_rp else 'NO'):>9} "
              f"{(rp / s if rp and s else float('nan')):8.2f} "
              f"{(r.get('replay_paired_us') or float('nan')) / s if s else float('nan'):8.2f}")
    # S at more threads never above S at fewer (the budget takes each layer's fastest count).
    by = {(r["model"], r["batch"], r["threads"]): r["S_us"] for r in rows}
    counts = sorted(int(x) for x in a.threads.split(","))
    for (m, b, t), s in sorted(by.items()):
        for fewer in counts:
            if fewer < t and (m, b, fewer) in by and s > by[(m, b, fewer)] * 1.000001:
                print(f"S at {t} threads above S at {fewer}: {m} b{b}: {s:.1f} vs {by[(m, b, fewer)]:.1f} us")
                bad += 1
    for t, sec in seconds.items():
        print(f"floorline run at a budget of {t} thread(s): {sec:.0f} s")
    if not a.from_reports:
        (out / "sweep.json").write_text(json.dumps({"rows": rows, "seconds": seconds}, indent=1))
    print("bounds hold" if bad == 0 else f"{bad} bound violation(s)")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
