#!/usr/bin/python3
"""Measure the end-to-end latency of the zoo models in PyTorch, for `floorline db import --framework`.

Run with Debian's interpreter (/usr/bin/python3: python3-torch 1.13, python3-torchvision 0.14).
Each model is built with the same torchvision constructor as models/export_zoo.py (random weights,
nothing downloaded), put in eval mode, and timed under torch.no_grad() on a random input: warm-up
calls, then --repetitions timed calls (fewer, but at least 3, once they took --budget seconds);
the median, minimum, maximum and standard deviation go into one JSON row per model x batch x setting.

Settings (the analyzer's M is the fastest of them):
  CPU  "eager"        the nn.Module as written
       "torchscript"  torch.jit.trace + torch.jit.optimize_for_inference (frozen, Conv+BN folded,
                      convolutions on oneDNN): PyTorch's own deployment path on a CPU
  GPU  "eager fp32 cudnn.benchmark=0" and "eager fp32 cudnn.benchmark=1": TF32 off for cuDNN and for
       matmuls (torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False), so
       that PyTorch computes in the math S is measured in (fp32). PyTorch's own default lets cuDNN's
       convolutions use TF32 Tensor Cores, which the analyzer's S_tf32 bound covers, not S.

  /usr/bin/python3 models/measure_pytorch.py --out pytorch.json                  # CPU, 1 thread, batch 1
  /usr/bin/python3 models/measure_pytorch.py --only resnet50,vit_b_16 --batch 1,8 --threads 2 --out p.json
  /usr/bin/python3 models/measure_pytorch.py --device cuda --out gpu.json        # CUDA events
  floorline db import zoo.db --framework pytorch.json

CPU: the thread count is torch.set_num_threads(--threads) (match `floorline bench --threads`, default 1;
the analyzer compares only equal thread counts) and the clock is time.perf_counter. GPU: CUDA events
around each call on the current stream.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_zoo import ZOO  # noqa: E402  (the zoo's constructors and input shapes)


def enough(times, repetitions, budget_s):
    """At least 3 timed calls; then stop at `repetitions` or once the calls took `budget_s` seconds."""
    return len(times) >= repetitions or (len(times) >= 3 and sum(times) / 1e6 >= budget_s)


def scripted(model, x):
    """The model traced, frozen and optimized for inference (TorchScript: Conv+BN folded, convolutions
    on oneDNN/MKL-DNN with its blocked layouts): PyTorch's own deployment path on a CPU."""
    with torch.no_grad():
        return torch.jit.optimize_for_inference(torch.jit.trace(model, x))


def time_cpu(model, x, warmup, repetitions, budget_s):
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            model(x)
        while not enough(times, repetitions, budget_s):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1e6)
    return times


def time_cuda(model, x, warmup, repetitions, budget_s):
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            model(x)
        torch.cuda.synchronize()
        while not enough(times, repetitions, budget_s):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated model names (default: the whole zoo)")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--budget", type=float, default=10.0,
                    help="seconds of timed calls per model and setting after which fewer repetitions suffice (min 3)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    names = [n for n in args.only.split(",") if n] or list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        sys.exit(f"measure_pytorch: unknown model(s): {', '.join(unknown)} (known: {', '.join(ZOO)})")
    batches = [int(b) for b in args.batch.split(",")]
    device_name = "cpu" if args.device == "cpu" else torch.cuda.get_device_name(0)
    settings = (["eager", "torchscript"] if args.device == "cpu" else
                ["eager fp32 cudnn.benchmark=0", "eager fp32 cudnn.benchmark=1"])
    if args.device == "cuda":  # fp32 math, as S (the docstring)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for name in names:
        _, build, shape = ZOO[name]
        try:
            model = build().eval().to(args.device)
        except Exception as e:  # one model that cannot be built never stops the zoo
            print(f"measure_pytorch: {name}: cannot build: {e}", file=sys.stderr)
            continue
        for batch in batches:
            x = torch.randn((batch,) + tuple(shape), device=args.device)
            for setting in settings:
                if args.device == "cuda":
                    torch.backends.cudnn.benchmark = setting.endswith("=1")
                try:
                    run = model if setting != "torchscript" else scripted(model, x)
                    t = (time_cpu if args.device == "cpu" else time_cuda)(run, x, args.warmup, args.repetitions,
                                                                        args.budget)
                except Exception as e:
                    print(f"measure_pytorch: {name} batch {batch}: {e}", file=sys.stderr)
                    continue
                row = {
                    "model_name": name, "runtime": "pytorch", "runtime_version": torch.__version__,
                    "device": device_name, "batch": batch, "dtype": "f32", "settings": setting,
                    "threads": args.threads if args.device == "cpu" else 0,
                    "median_us": statistics.median(t), "min_us": min(t), "max_us": max(t),
                    "stddev_us": statistics.stdev(t) if len(t) > 1 else 0.0, "repetitions": len(t),
                    "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                rows.append(row)
                print(f"{name:28s} b{batch:<3d} {setting:24s} median {row['median_us'] / 1e3:9.2f} ms "
                      f"(min {row['min_us'] / 1e3:.2f}, max {row['max_us'] / 1e3:.2f}, n={len(t)})", flush=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {len(rows)} row(s) to {args.out}")


if __name__ == "__main__":
    main()
