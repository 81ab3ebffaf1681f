#!/usr/bin/python3
"""Hostile-input campaign: mutated copies of zoo models through `floorline layers`.

    /usr/bin/python3 bench/hostile_campaign.py --floorline build/bin/floorline [--count 10000]
        [--jobs 2] [--seed 1] [--timeout 120] [--keep DIR] [--zoo models/zoo]

Makes COUNT mutants of the models in the zoo, half byte-level (truncation, 1/10/100 flipped bytes,
a spliced range, random garbage) and half structural, one field changed at a time with the onnx
package (dims, ranks, attributes, wiring, opset, external data, names, shape constants). Each is run
alone as `floorline layers FILE --format json` in its own folder, with a wall-time limit and its
peak memory measured (wait4's ru_maxrss, which covers the worker processes it forks). Prints the
table tried / clear error / crash / hang / accepted per mutation family, then the checks:

  crash     killed by a signal, or the text of an abort ("terminate called", "Aborted")
  hang      still running after --timeout seconds
  clear     exit status 1, exactly one "error:" line on stderr, naming the file; stdout valid JSON
  unclear   any other failure (several lines, no file name, exit status other than 1)
  accepted  exit status 0 with valid JSON
  leak      any output holds bytes of a file outside the model's folder (external-data mutants
            point at /etc/passwd and /etc/hostname)

Crashers, hangs and unclear cases are copied to --keep (default: hostile_findings/) for replay.
Needs the onnx package (`apt-get install -y python3-onnx`); run with Debian's /usr/bin/python3.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
BAD_INTS = [0, -1, -7, 2**31 + 1, 10**12, INT64_MAX, INT64_MIN, 100000, 2**40]
BAD_UTF8 = b"\xff\xfe\xc3(\xed\xa0\x80"
PASSWD_SECRET = open("/etc/passwd", "rb").read(64) if os.path.exists("/etc/passwd") else b"root:x:0"


# ------------------------------------------------------------------------------------------------
# Byte-level mutations.

def truncate(data, rng):
    return data[: rng.randrange(0, max(1, len(data)))]


def flip(n):
    def f(data, rng):
        b = bytearray(data)
        for _ in range(n):
            if b:
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b)
    f.__name__ = f"flip{n}"
    return f


def splice(data, rng):
    if len(data) < 4:
        return data
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randrange(1, 4096))
    c = rng.randrange(len(data))
    return data[:c] + data[a:b] + data[c + (b - a) // 2:]


def garbage(data, rng):
    return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 4096)))


BYTE_MUTATORS = [truncate, flip(1), flip(10), flip(100), splice, garbage]


# ------------------------------------------------------------------------------------------------
# Structural mutations: one field changed at a time. Each returns a description and mutates `m`.

def all_graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_graphs(a.g)
            for sg in a.graphs:
                yield from all_graphs(sg)


def dims_mut(m, rng, ctx):
    g = m.graph
    init_names = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in init_names and i.type.tensor_type.HasField("shape")]
    if inputs and rng.random() < 0.6:
        v = rng.choice(inputs)
        dims = v.type.tensor_type.shape.dim
        if not dims:
            return "dims: none"
        k = rng.randrange(len(dims))
        val = rng.choice(BAD_INTS + [0, -1])
        dims[k].dim_value = val
        return f"dims: input {v.name} axis {k} = {val}"
    if not g.initializer:
        return "dims: none"
    t = rng.choice(g.initializer)
    if not t.dims:
        t.dims.append(rng.choice(BAD_INTS))
    else:
        t.dims[rng.randrange(len(t.dims))] = rng.choice(BAD_INTS)
    return f"dims: initializer {t.name}"


def rank_mut(m, rng, ctx):
    g = m.graph
    init_names = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in init_names and i.type.tensor_type.HasField("shape")]
    rank = rng.choice([0, 1, 2, 5, 9, 12])
    if inputs and rng.random() < 0.6:
        v = rng.choice(inputs)
        shape = v.type.tensor_type.shape
        while len(shape.dim) > rank:
            shape.dim.pop()
        while len(shape.dim) < rank:
            shape.dim.add().dim_value = rng.choice([1, 2, 3])
        return f"rank: input {v.name} -> {rank}"
    if not g.initializer:
        return "rank: none"
    t = rng.choice(g.initializer)
    while len(t.dims) > rank:
        t.dims.pop()
    while len(t.dims) < rank:
        t.dims.append(1)
    return f"rank: initializer {t.name} -> {rank}"


def attr_mut(m, rng, ctx):
    nodes = [n for g in all_graphs(m.graph) for n in g.node if n.attribute]
    if not nodes:
        return "attr: none"
    n = rng.choice(nodes)
    a = rng.choice(list(n.attribute))
    if a.type == onnx.AttributeProto.INT:
        a.i = rng.choice(BAD_INTS)
    elif a.type == onnx.AttributeProto.INTS:
        if a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice(BAD_INTS)
        else:
            a.ints.append(rng.choice(BAD_INTS))
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice([float("nan"), float("inf"), -1e38, 0.0])
    elif a.type == onnx.AttributeProto.STRING:
        a.s = rng.choice([b"", b"SAME_UPPER", b"bogus", BAD_UTF8])
    else:
        a.type = rng.choice([onnx.AttributeProto.INT, onnx.AttributeProto.STRING])
    return f"attr: {n.op_type}.{a.name}"


def conv_mut(m, rng, ctx):
    """The attributes that crashed ONNX 1.12: strides/dilations/kernel/group/pads of convolutions."""
    nodes = [n for n in m.graph.node if n.op_type in ("Conv", "MaxPool", "AveragePool", "ConvTranspose")]
    if not nodes:
        return attr_mut(m, rng, ctx)
    n = rng.choice(nodes)
    name = rng.choice(["strides", "dilations", "kernel_shape", "group", "pads", "auto_pad"])
    attrs = {a.name: a for a in n.attribute}
    val = rng.choice([0, -1, 2**40, 100000, INT64_MIN])
    if name == "group":
        if "group" in attrs:
            attrs["group"].i = val
        else:
            n.attribute.append(helper.make_attribute("group", val))
    elif name == "auto_pad":
        for k in ("pads",):
            if k in attrs:
                n.attribute.remove(attrs[k])
        n.attribute.append(helper.make_attribute("auto_pad", "SAME_UPPER"))
        a = attrs.get("strides")
        if a is not None and a.ints:
            a.ints[0] = 0
    elif name in attrs:
        a = attrs[name]
        if a.ints:
            a.ints[rng.randrange(len(a.ints))] = val
    else:
        n.attribute.append(helper.make_attribute(name, [val, val]))
    return f"conv: {n.op_type}.{name} = {val}"


def wiring_mut(m, rng, ctx):
    g = m.graph
    if not g.node:
        return "wiring: none"
    kind = rng.choice(["duplicate_list", "self_loop", "cycle", "rewire", "drop_node", "dup_output", "dangling"])
    i = rng.randrange(len(g.node))
    n = g.node[i]
    if kind == "duplicate_list":
        nodes = list(g.node)
        g.node.extend(nodes)
    elif kind == "self_loop" and n.input and n.output:
        n.input[0] = n.output[0]
    elif kind == "cycle" and n.input and len(g.node) > i + 1:
        later = g.node[rng.randrange(i + 1, len(g.node))]
        if later.output:
            n.input[0] = later.output[0]
    elif kind == "rewire" and n.input:
        names = [o for x in g.node for o in x.output] + [v.name for v in g.input]
        n.input[rng.randrange(len(n.input))] = rng.choice(names)
    elif kind == "drop_node":
        del g.node[i]
    elif kind == "dup_output" and len(g.node) > 1 and n.output:
        other = g.node[rng.randrange(len(g.node))]
        if other.output:
            other.output[0] = n.output[0]
    elif kind == "dangling" and n.input:
        n.input[0] = "nowhere"
    return f"wiring: {kind} at node {i}"


def opset_mut(m, rng, ctx):
    v = rng.choice([0, -1, 1, 6, 18, 21, 10**9, None])
    if v is None:
        del m.opset_import[:]
    else:
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = v
    return f"opset: {v}"


def external_mut(m, rng, ctx):
    g = m.graph
    # Prefer a tensor whose value shape inference needs (a Reshape target and the like): only those
    # are ever read, so only they exercise the containment.
    shape_inputs = {n.input[1] for n in g.node
                    if n.op_type in ("Reshape", "Expand", "Slice", "Pad", "Resize", "Tile", "Unsqueeze",
                                     "Squeeze", "ReduceMean") and len(n.input) > 1}
    needed = [t for t in g.initializer if t.name in shape_inputs]
    # The zoo carries its shape constants as Constant nodes: make one an external-data initializer.
    consts = [n for n in g.node if n.op_type == "Constant" and n.output and n.output[0] in shape_inputs and
              any(a.name == "value" for a in n.attribute)]
    if not needed and consts:
        n = rng.choice(consts)
        value = next(a.t for a in n.attribute if a.name == "value")
        t = g.initializer.add()
        t.CopyFrom(value)
        t.name = n.output[0]
        g.node.remove(n)
        needed = [t]
    small = [t for t in g.initializer if 0 < len(t.dims) and len(t.dims) <= 2 and
             t.data_type == TensorProto.INT64]
    pool = needed or small or list(g.initializer)
    if not pool:
        return "external: none"
    t = rng.choice(pool)
    target = rng.choice(["/etc/passwd", "../../../../../../etc/passwd", "/dev/zero", "fifo", "link_passwd",
                         "link_dir", "absent.bin", "ok.bin"])
    offset = rng.choice(["0", "0", "-5", "abc", str(2**62), "3"])
    length = rng.choice([None, "3000000000", "16", "-1", "0"])
    t.ClearField("raw_data")
    t.ClearField("int64_data")
    t.ClearField("float_data")
    del t.external_data[:]
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", target), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, v
    ctx["extras"] = target
    return f"external: {t.name} -> {target} offset {offset} length {length}"


def names_mut(m, rng, ctx):
    nodes = [n for n in m.graph.node]
    if not nodes:
        return "names: none"
    n = rng.choice(nodes)
    field = rng.choice(["name", "op_type", "output"])
    bad = BAD_UTF8.decode("latin-1")
    if field == "name":
        n.name = n.name + bad
    elif field == "op_type":
        n.op_type = n.op_type + bad
    elif n.output:
        # keep the wiring: rename the value everywhere
        old = n.output[0]
        new = old + bad
        for x in m.graph.node:
            for k, v in enumerate(x.input):
                if v == old:
                    x.input[k] = new
        n.output[0] = new
        for o in m.graph.output:
            if o.name == old:
                o.name = new
    return f"names: {field}"


def constant_mut(m, rng, ctx):
    """Shape constants (small int64 initializers and Constant nodes) set to extreme values."""
    ts = [t for t in m.graph.initializer if t.data_type == TensorProto.INT64 and 0 < len(t.raw_data) <= 64]
    cs = [n for n in m.graph.node if n.op_type == "Constant"]
    vals = [INT64_MIN, INT64_MAX, -1, 0, 2**40, -(2**62)]
    if ts and (not cs or rng.random() < 0.5):
        t = rng.choice(ts)
        import struct
        k = len(t.raw_data) // 8
        arr = list(struct.unpack(f"<{k}q", t.raw_data))
        arr[rng.randrange(k)] = rng.choice(vals)
        t.raw_data = struct.pack(f"<{k}q", *arr)
        return f"constant: initializer {t.name}"
    if cs:
        n = rng.choice(cs)
        for a in n.attribute:
            if a.name == "value" and a.t.data_type == TensorProto.INT64:
                import numpy as np
                from onnx import numpy_helper
                arr = numpy_helper.to_array(a.t).copy()
                if arr.size:
                    arr.flat[rng.randrange(arr.size)] = rng.choice(vals)
                    a.t.CopyFrom(numpy_helper.from_array(arr, a.t.name))
                    return f"constant: node {n.name}"
    return attr_mut(m, rng, ctx)


STRUCT_MUTATORS = [dims_mut, rank_mut, attr_mut, conv_mut, wiring_mut, opset_mut, external_mut, names_mut,
                   constant_mut]


# ------------------------------------------------------------------------------------------------

def make_case(index, zoo_files, zoo_bytes, seed, workdir):
    rng = random.Random(seed * 1000003 + index)
    src = rng.choice(zoo_files)
    case_dir = os.path.join(workdir, f"c{index:05d}")
    os.makedirs(case_dir, exist_ok=True)
    path = os.path.join(case_dir, f"m{index:05d}.onnx")
    ctx = {}
    if index % 2 == 0:
        mut = BYTE_MUTATORS[(index // 2) % len(BYTE_MUTATORS)]
        data = mut(zoo_bytes[src], rng)
        family, what = ("byte:" + mut.__name__), mut.__name__
    else:
        mut = STRUCT_MUTATORS[(index // 2) % len(STRUCT_MUTATORS)]
        m = onnx.ModelProto()
        m.ParseFromString(zoo_bytes[src])
        what = mut(m, rng, ctx)
        data = m.SerializeToString()
        family = "field:" + mut.__name__.replace("_mut", "")
    with open(path, "wb") as f:
        f.write(data)
    # The surroundings external-data mutants point at.
    if ctx.get("extras"):
        os.mkfifo(os.path.join(case_dir, "fifo"))
        os.symlink("/etc/passwd", os.path.join(case_dir, "link_passwd"))
        os.symlink("/etc", os.path.join(case_dir, "link_dir"))
        with open(os.path.join(case_dir, "ok.bin"), "wb") as f:
            f.write(bytes(range(64)))
    return path, family, f"{os.path.basename(src)}: {what}"


def run_case(floorline, path, timeout):
    """Runs one case; returns (exit status or -signal, stdout, stderr, hung, seconds, peak RSS in KiB).
    The process is reaped with wait4 so that its rusage (ru_maxrss: the process or the largest
    worker it forked and waited for) is ours to read."""
    import threading
    t0 = time.monotonic()
    p = subprocess.Popen([floorline, "layers", path, "--format", "json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    bufs = {"out": b"", "err": b""}

    def drain(stream, key):
        bufs[key] = stream.read()
    readers = [threading.Thread(target=drain, args=(p.stdout, "out")),
               threading.Thread(target=drain, args=(p.stderr, "err"))]
    for r in readers:
        r.start()
    hung = False
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            break
        if time.monotonic() - t0 > timeout:
            hung = True
            os.killpg(p.pid, signal.SIGKILL)
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.01)
    p.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    return p.returncode, bufs["out"], bufs["err"], hung, time.monotonic() - t0, ru.ru_maxrss


def classify(path, rc, out, err, hung):
    text = err.decode("utf-8", "replace")
    leak = PASSWD_SECRET[:8] in out + err or str(int.from_bytes(PASSWD_SECRET[:8], "little")) in text + \
        out.decode("utf-8", "replace")
    if hung:
        return "hang", leak
    if rc is not None and rc < 0:
        return "crash", leak
    if "terminate called" in text or "Aborted" in text or "Segmentation fault" in text:
        return "crash", leak
    json_ok = True
    try:
        json.loads(out.decode("utf-8"))
    except Exception:
        json_ok = False
    if rc == 0:
        return ("accepted" if json_ok else "unclear"), leak
    # The zoo summary line ("1 of 1 model(s) failed") and warnings are not part of the error.
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("warning:") and
             not re.match(r"^\d+ of \d+ model\(s\) failed", l)]
    errors = [l for l in lines if l.startswith("error:")]
    if rc == 1 and len(errors) == 1 and len(lines) == 1 and path in errors[0] and json_ok:
        return "clear", leak
    return "unclear", leak


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--floorline", required=True)
    ap.add_argument("--zoo", default=os.path.join(os.path.dirname(__file__), "..", "models", "zoo"))
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--keep", default="hostile_findings")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    floorline = os.path.abspath(args.floorline)
    zoo_files = sorted(os.path.join(args.zoo, f) for f in os.listdir(args.zoo) if f.endswith(".onnx"))
    zoo_bytes = {f: open(f, "rb").read() for f in zoo_files}
    workdir = args.workdir or tempfile.mkdtemp(prefix="floorline_hostile_")
    os.makedirs(args.keep, exist_ok=True)

    table = collections.defaultdict(collections.Counter)
    peak = 0
    slowest = 0.0
    findings = []
    leaks = []
    t_start = time.monotonic()

    def one(i):
        path, family, what = make_case(i, zoo_files, zoo_bytes, args.seed, workdir)
        rc, out, err, hung, secs, rss = run_case(floorline, path, args.timeout)
        verdict, leak = classify(path, rc, out, err, hung)
        first = err.decode("utf-8", "replace").strip().splitlines()[:1]
        shutil.rmtree(os.path.dirname(path)) if verdict in ("clear", "accepted") and not leak else None
        return i, path, family, what, verdict, leak, rc, secs, rss, (first[0] if first else "")

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for done, r in enumerate(pool.map(one, range(args.count)), 1):
            i, path, family, what, verdict, leak, rc, secs, rss, first = r
            table[family][verdict] += 1
            table[family]["tried"] += 1
            peak = max(peak, rss)
            slowest = max(slowest, secs)
            if leak:
                leaks.append((path, what))
            if verdict in ("crash", "hang", "unclear"):
                keep = os.path.join(args.keep, f"{verdict}_{i:05d}.onnx")
                if os.path.exists(path):
                    shutil.copy(path, keep)
                findings.append((verdict, keep, what, rc, first))
            if done % 500 == 0:
                print(f"... {done}/{args.count} in {time.monotonic() - t_start:.0f} s", file=sys.stderr, flush=True)

    cols = ["tried", "clear", "crash", "hang", "accepted", "unclear"]
    print(f"{'family':<22}" + "".join(f"{c:>10}" for c in cols))
    total = collections.Counter()
    for fam in sorted(table):
        print(f"{fam:<22}" + "".join(f"{table[fam][c]:>10}" for c in cols))
        total.update(table[fam])
    print(f"{'total':<22}" + "".join(f"{total[c]:>10}" for c in cols))
    print(f"\npeak memory (max RSS of one run, workers included): {peak / 1024:.1f} MiB")
    print(f"slowest run: {slowest:.1f} s; campaign wall time {time.monotonic() - t_start:.0f} s, {args.jobs} jobs")
    print(f"leaks of files outside the model's folder: {len(leaks)}")
    for path, what in leaks[:20]:
        print(f"  LEAK {path}: {what}")
    for verdict, keep, what, rc, first in findings[:50]:
        print(f"  {verdict.upper():8} {keep} (rc {rc}) {what}\n           {first[:200]}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if total["crash"] or total["hang"] or leaks else 0


if __name__ == "__main__":
    sys.exit(main())
