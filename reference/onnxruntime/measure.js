#!/usr/bin/env node
// Floorline's reference runtime: times ONNX models end to end in ONNX Runtime (CPU) and, in a
// separate pass, records ONNX Runtime's per-node profile. Writes the file that
// `floorline db import --framework` reads, and one profile per model, batch and setting that
// `floorline db import --framework-profile` reads.
//
//   node measure.js [options] MODEL.onnx...
//     --batch 1,8          batch sizes (default 1)
//     --dim [MODEL:]NAME=V1,V2
//                          values of a named symbolic input dim (repeatable; several values sweep):
//                          a model runs in every combination of the values of the dims its inputs
//                          use, each recorded as MODEL[NAME=V;...] (names sorted), as Floorline
//                          names the scenario (model_processor/model.hpp, scenario_name); with
//                          MODEL: (a model's file stem) for that model only, over NAME=V
//     --threads N          intra-op threads, the benchmarks' thread count (default 1)
//     --settings all,disabled
//                          graph optimization levels to time (default both: "all" is what a user
//                          gets, "disabled" runs the graph as exported, node by node)
//     --min-time-ms 1000   timed runs go on until both this time and --min-runs are reached...
//     --min-runs 10
//     --max-time-ms 20000  ...or until this time has passed (after at least 3 runs)
//     --warmup 3           untimed runs first (the first run allocates and packs weights)
//     --profile-runs 5     runs of the profiling pass (its first run is left out by the importer)
//     --profile-settings all
//                          settings that get a profiling pass (default: the first of --settings)
//     --no-profile         skip the profiling pass
//     --time-in-profile    time the runs in the profiling session (a first look: one session per
//                          model instead of two; the warm-up is 1 run, --profile-runs is unused,
//                          and the latencies carry the profiler's small overhead)
//     --time-in-profile-above-ms MS
//                          a model whose first run in the profiling session (its warm-up, which
//                          the importer leaves out of the profile) takes MS or more is timed in that
//                          session, as --time-in-profile does; a shorter one gets the profiling
//                          pass first (--profile-runs in all, that run included) and is timed in a
//                          session of its own (default 0: off). For a run of seconds the
//                          profiler's overhead (an event per node) is well under 1%, and a separate
//                          profiling pass cost 3 more runs: fcn_resnet50 at batch 32 runs 42 s
//     --names a,b          model names to record (default: each file's stem)
//     --device NAME        the device the rows name (default cpu; floorline run writes cpu:<CPU model>)
//     --out FILE           the JSON written (default ort_latencies.json)
//     --profile-dir DIR    where the profiles go (default: next to --out)
//
// Sessions: intra-op threads = --threads, inter-op threads 1, sequential execution, the CPU
// execution provider, graph optimization level per setting. Inputs: fixed-seed values (floats
// uniform in [-1, 1), integers and bools 0 or 1), the first dimension of each input set to the
// batch size when it is symbolic (or when it is 1 and a larger batch is asked: Floorline
// re-batches the same way) unless --dim names it, a dim --dim names set to its value; a model
// whose inputs have other symbolic dims, or a fixed batch dim other than the one asked for, is
// skipped with a reason. Times are wall-clock per
// session.run() (steady clock, process.hrtime), in microseconds.
//
// Output: {"framework_latencies": [rows], "profiles": [{model_name, batch, settings, file}],
//          "skipped": [{model_name, batch, settings, reason}]}, written again (whole, through a
// rename) after every model, batch and setting, with "running": {model_name, batch, settings}
// naming the one under way: where ONNX Runtime takes the process down (a native crash, the
// out-of-memory killer), the file holds everything measured before, and names the culprit
// (floorline run then goes on with the models after it). FLOORLINE_MEASURE_ABORT_AT=NAME aborts the
// process as NAME starts, as such a crash would (for the tests). A profile entry also names
// the model file run ("model") and, for settings that optimize the graph, the optimized graph as
// ONNX Runtime saved it ("graph": node names, ops, inputs and outputs; its weights are deleted):
// the importer needs both to map each runtime node (fused ones included) to the model's nodes.
// "profile" and "graph" are relative to the folder of --out (where the importer resolves them,
// whatever the working directory), "model" is absolute. Exit status 0 even when some
// models are skipped or fail (they are listed); 2 on bad arguments or when onnxruntime-node is
// not installed (`npm ci` here).
'use strict';

const fs = require('fs');
const path = require('path');

function usage(msg) {
  process.stderr.write(`measure.js: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = {
    batch: [1],
    dims: {},
    threads: 1,
    settings: ['all', 'disabled'],
    minTimeMs: 1000,
    minRuns: 10,
    maxTimeMs: 20000,
    warmup: 3,
    profileRuns: 5,
    profile: true,
    timeInProfile: false,
    timeInProfileAboveMs: 0,
    profileSettings: null,
    names: null,
    device: 'cpu',
    out: 'ort_latencies.json',
    profileDir: null,
    models: [],
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    const int = (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) usage(`${a} ${v}: not a non-negative integer`);
      return n;
    };
    if (a === '--batch') o.batch = next().split(',').map(int);
    else if (a === '--dim') {
      const v = next();
      const eq = v.indexOf('=');
      if (eq <= 0 || eq === v.length - 1) usage(`--dim ${v}: expected [MODEL:]NAME=VALUE[,VALUE...]`);
      const name = v.slice(0, eq);
      const colon = name.indexOf(':');
      if (colon === 0 || colon === name.length - 1) usage(`--dim ${v}: expected [MODEL:]NAME=VALUE[,VALUE...]`);
      if (name in o.dims) usage(`--dim ${v}: ${name} is given twice`);
      o.dims[name] = v.slice(eq + 1).split(',').map(int);
    }
    else if (a === '--threads') o.threads = int(next());
    else if (a === '--settings') o.settings = next().split(',');
    else if (a === '--min-time-ms') o.minTimeMs = int(next());
    else if (a === '--min-runs') o.minRuns = int(next());
    else if (a === '--max-time-ms') o.maxTimeMs = int(next());
    else if (a === '--warmup') o.warmup = int(next());
    else if (a === '--profile-runs') o.profileRuns = int(next());
    else if (a === '--no-profile') o.profile = false;
    else if (a === '--time-in-profile') o.timeInProfile = true;
    else if (a === '--time-in-profile-above-ms') o.timeInProfileAboveMs = int(next());
    else if (a === '--profile-settings') o.profileSettings = next().split(',');
    else if (a === '--names') o.names = next().split(',');
    else if (a === '--device') o.device = next();
    else if (a === '--out') o.out = next();
    else if (a === '--profile-dir') o.profileDir = next();
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else o.models.push(a);
  }
  if (o.models.length === 0) usage('no MODEL.onnx given');
  if (o.names && o.names.length !== o.models.length) usage('--names must name every model');
  for (const s of o.settings)
    if (!['disabled', 'basic', 'extended', 'layout', 'all'].includes(s)) usage(`unknown setting ${s}`);
  if (o.batch.some((b) => b < 1)) usage('batch sizes must be positive');
  if (o.threads < 1) usage('--threads must be positive');
  if (!o.profileSettings) o.profileSettings = o.settings.slice(0, 1);
  if (!o.profileDir) o.profileDir = path.dirname(path.resolve(o.out));
  return o;
}

// A path as the importer reads it: relative to the folder of the output file `out`.
function besideOut(out, p) {
  return path.relative(path.dirname(path.resolve(out)), path.resolve(p));
}

// mulberry32: a small fixed-seed generator, the same values on every machine.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The dims that apply to the model `stem`: NAME=V for every model, MODEL:NAME=V for the model of
// that name only (over NAME=V), as Floorline resolves them (model_processor/src/named_dims.cpp).
function dimsFor(stem, dims) {
  const out = {};
  for (const [k, v] of Object.entries(dims)) if (!k.includes(':')) out[k] = v;
  for (const [k, v] of Object.entries(dims)) {
    const c = k.indexOf(':');
    if (c > 0 && k.slice(0, c) === stem) out[k.slice(c + 1)] = v;
  }
  return out;
}

// The scenarios of a model under --dim: every combination of the values of the named dims its
// inputs use (names sorted, the last varying fastest), as [[name, value], ...] lists.
function scenarios(session, dims) {
  const used = new Set();
  for (const meta of session.inputMetadata)
    if (meta.isTensor) for (const d of meta.shape) if (typeof d === 'string' && d in dims) used.add(d);
  let out = [[]];
  for (const name of [...used].sort()) out = out.flatMap((p) => dims[name].map((v) => [...p, [name, v]]));
  return out;
}

function scenarioName(stem, scenario) {
  return scenario.length === 0 ? stem : `${stem}[${scenario.map(([n, v]) => `${n}=${v}`).join(';')}]`;
}

// The feeds of a session at a batch size and scenario, or a reason why the model cannot take it.
function makeFeeds(ort, session, batch, scenario) {
  const feeds = {};
  const named = new Map(scenario);
  let k = 0;
  for (const meta of session.inputMetadata) {
    if (!meta.isTensor) return { reason: `input '${meta.name}' is not a tensor` };
    const dims = meta.shape.map((d, i) => {
      if (typeof d === 'string' && named.has(d)) return named.get(d);
      if (i === 0 && (typeof d === 'string' || d === 1 || d === -1)) return batch;
      return d;
    });
    if (meta.shape.length > 0 && typeof meta.shape[0] === 'number' && meta.shape[0] > 1 && meta.shape[0] !== batch)
      return { reason: `input '${meta.name}' has a fixed batch dim ${meta.shape[0]}` };
    const sym = dims.find((d) => typeof d !== 'number' || d < 0);
    if (sym !== undefined) return { reason: `input '${meta.name}' has a symbolic dim '${sym}' besides the batch` };
    const n = dims.reduce((a, b) => a * b, 1);
    const r = rng(1234 + 7919 * k++);
    let data;
    switch (meta.type) {
      case 'float32':
        data = Float32Array.from({ length: n }, () => 2 * r() - 1);
        break;
      case 'float64':
        data = Float64Array.from({ length: n }, () => 2 * r() - 1);
        break;
      case 'int64':
        data = BigInt64Array.from({ length: n }, () => BigInt(r() < 0.5 ? 0 : 1));
        break;
      case 'int32':
        data = Int32Array.from({ length: n }, () => (r() < 0.5 ? 0 : 1));
        break;
      case 'bool':
        data = Uint8Array.from({ length: n }, () => (r() < 0.5 ? 0 : 1));
        break;
      default:
        return { reason: `input '${meta.name}' has type ${meta.type}, which the script does not generate` };
    }
    feeds[meta.name] = new ort.Tensor(meta.type, data, dims);
  }
  return { feeds };
}

function sessionOptions(threads, level, profilePrefix, optimizedPath) {
  const o = {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: level,
    logSeverityLevel: 3,
  };
  if (profilePrefix) {
    o.enableProfiling = true;
    o.profileFilePrefix = profilePrefix;
  }
  if (optimizedPath) {
    // The weights go to a side file (deleted after): only the graph's structure is needed.
    o.optimizedModelFilePath = optimizedPath;
    o.extra = {
      session: {
        optimized_model_external_initializers_file_name: path.basename(optimizedPath) + '.data',
        optimized_model_external_initializers_min_size_in_bytes: '64',
      },
    };
  }
  return o;
}

function stats(us) {
  const s = [...us].sort((a, b) => a - b);
  const n = s.length;
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const mean = s.reduce((a, b) => a + b, 0) / n;
  const sd = Math.sqrt(s.reduce((a, b) => a + (b - mean) * (b - mean), 0) / Math.max(n - 1, 1));
  return { median_us: median, min_us: s[0], max_us: s[n - 1], stddev_us: sd, repetitions: n };
}

async function timeRuns(session, feeds, o) {
  for (let k = 0; k < o.warmup; ++k) await session.run(feeds);
  const us = [];
  const t0 = process.hrtime.bigint();
  for (;;) {
    const a = process.hrtime.bigint();
    await session.run(feeds);
    const b = process.hrtime.bigint();
    us.push(Number(b - a) / 1e3);
    const elapsedMs = Number(b - t0) / 1e6;
    if (us.length >= o.minRuns && elapsedMs >= o.minTimeMs) break;
    if (elapsedMs >= o.maxTimeMs && us.length >= Math.min(3, o.minRuns)) break;
  }
  return stats(us);
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    usage(`onnxruntime-node is not installed here (${__dirname}): run \`npm ci\` in it (scripts/install-deps does)`);
  }
  const version = require('onnxruntime-node/package.json').version;
  fs.mkdirSync(o.profileDir, { recursive: true });
  const result = { framework_latencies: [], profiles: [], skipped: [] };
  const save = () => {
    fs.mkdirSync(path.dirname(path.resolve(o.out)), { recursive: true });
    fs.writeFileSync(o.out + '.tmp', JSON.stringify(result, null, 1) + '\n');
    fs.renameSync(o.out + '.tmp', o.out);
  };
  const t_all = Date.now();
  for (let m = 0; m < o.models.length; ++m) {
    const file = o.models[m];
    const stem = o.names ? o.names[m] : path.basename(file, '.onnx');
    let cases = [[]];
    if (Object.keys(o.dims).length > 0) {
      result.running = { model_name: stem, batch: o.batch[0], settings: 'probe' };
      save();
      try {
        const probe = await ort.InferenceSession.create(file, sessionOptions(o.threads, 'disabled'));
        cases = scenarios(probe, dimsFor(stem, o.dims));
        await probe.release();
      } catch (e) {
        const reason = String(e.message || e).split('\n')[0];
        result.skipped.push({ model_name: stem, batch: o.batch[0], settings: '', reason });
        process.stderr.write(`  ort ${stem}: failed: ${reason}\n`);
        continue;
      }
    }
    for (const scenario of cases)
    for (const batch of o.batch) {
      const name = scenarioName(stem, scenario);
      for (const level of o.settings) {
        const settings = `graph_optimization=${level}`;
        result.running = { model_name: name, batch, settings };
        save();
        if (process.env.FLOORLINE_MEASURE_ABORT_AT === name) process.abort();
        const t0 = Date.now();
        const profiled = o.profile && o.profileSettings.includes(level);
        const prefix = path.join(o.profileDir, `${name.replace(/[^A-Za-z0-9_.-]/g, '_')}_b${batch}_${level}`);
        try {
          const graph = level === 'disabled' ? null : `${prefix}.optimized.onnx`;
          // --time-in-profile: one session, the profiling one; its first run is the warm-up (which
          // the importer leaves out of the profile), the timed runs follow.
          let shared = profiled && o.timeInProfile;
          // --time-in-profile-above-ms: the profiling session first; its first run decides whether
          // the timed runs follow in it (a long run) or the profiling pass ends there (a short one).
          let s = null;
          let feeds = null;
          let profiledFirst = false;
          if (profiled && !shared && o.timeInProfileAboveMs > 0) {
            const ps = await ort.InferenceSession.create(file, sessionOptions(o.threads, level, prefix, graph));
            if (graph && fs.existsSync(graph + '.data')) fs.unlinkSync(graph + '.data');
            const f = makeFeeds(ort, ps, batch, scenario);
            if (f.reason) {
              result.skipped.push({ model_name: name, batch, settings, reason: f.reason });
              process.stderr.write(`  ort ${name} b${batch} ${level}: skipped: ${f.reason}\n`);
              ps.endProfiling();
              await ps.release();
              break;
            }
            feeds = f.feeds;
            const a = process.hrtime.bigint();
            await ps.run(f.feeds);
            const firstMs = Number(process.hrtime.bigint() - a) / 1e6;
            if (firstMs >= o.timeInProfileAboveMs) {
              s = await timeRuns(ps, f.feeds, { ...o, warmup: 0 });
              shared = true;
            } else {
              for (let k = 1; k < o.profileRuns; ++k) await ps.run(f.feeds);
            }
            ps.endProfiling();
            await ps.release();
            profiledFirst = true;
          }
          if (!s) {
            const session = await ort.InferenceSession.create(
              file,
              shared ? sessionOptions(o.threads, level, prefix, graph) : sessionOptions(o.threads, level),
            );
            if (shared && graph && fs.existsSync(graph + '.data')) fs.unlinkSync(graph + '.data');
            const f = makeFeeds(ort, session, batch, scenario);
            if (f.reason) {
              result.skipped.push({ model_name: name, batch, settings, reason: f.reason });
              process.stderr.write(`  ort ${name} b${batch} ${level}: skipped: ${f.reason}\n`);
              await session.release();
              break;
            }
            feeds = f.feeds;
            s = await timeRuns(session, f.feeds, shared ? { ...o, warmup: 1 } : o);
            if (shared) session.endProfiling();
            await session.release();
          }
          result.framework_latencies.push({
            model_name: name,
            runtime: 'onnxruntime',
            runtime_version: version,
            device: o.device,
            batch,
            dtype: 'f32',
            settings,
            threads: o.threads,
            ...s,
          });
          process.stderr.write(
            `  ort ${name} b${batch} ${level}: median ${s.median_us.toFixed(1)} us over ${s.repetitions} runs ` +
              `(${((Date.now() - t0) / 1000).toFixed(1)} s)\n`,
          );
          if (profiled) {
            if (!shared && !profiledFirst) {
              const ps = await ort.InferenceSession.create(file, sessionOptions(o.threads, level, prefix, graph));
              if (graph && fs.existsSync(graph + '.data')) fs.unlinkSync(graph + '.data');
              for (let k = 0; k < o.profileRuns; ++k) await ps.run(feeds);
              ps.endProfiling();
              await ps.release();
            }
            // ONNX Runtime names the file PREFIX_<date>.json: keep the newest under a stable name.
            const dir = path.dirname(prefix);
            const base = path.basename(prefix) + '_';
            const found = fs
              .readdirSync(dir)
              .filter((x) => x.startsWith(base) && x.endsWith('.json') && !x.endsWith('.profile.json'))
              .map((x) => path.join(dir, x))
              .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
            if (found.length > 0) {
              const target = `${prefix}.profile.json`;
              fs.renameSync(found[0], target);
              for (const stale of found.slice(1)) fs.unlinkSync(stale);
              result.profiles.push({
                model_name: name,
                batch,
                settings,
                threads: o.threads,
                runtime_version: version,
                device: o.device,
                profile: besideOut(o.out, target),
                graph: graph && fs.existsSync(graph) ? besideOut(o.out, graph) : null,
                model: path.resolve(file),
              });
            }
          }
        } catch (e) {
          const reason = String(e.message || e).split('\n')[0];
          // A profiling session that failed may have left its file (PREFIX_<date>.json): not ours to keep.
          if (profiled) {
            const dir = path.dirname(prefix);
            const base = path.basename(prefix) + '_';
            for (const x of fs.readdirSync(dir))
              if (x.startsWith(base) && x.endsWith('.json') && !x.endsWith('.profile.json')) fs.unlinkSync(path.join(dir, x));
          }
          result.skipped.push({ model_name: name, batch, settings, reason });
          process.stderr.write(`  ort ${name} b${batch} ${level}: failed: ${reason}\n`);
        }
      }
    }
  }
  delete result.running;
  save();
  process.stderr.write(
    `onnxruntime ${version}: ${result.framework_latencies.length} latencies, ${result.profiles.length} profiles, ` +
      `${result.skipped.length} skipped, ${((Date.now() - t_all) / 1000).toFixed(1)} s -> ${o.out}\n`,
  );
}

main().catch((e) => usage(String(e.stack || e)));
