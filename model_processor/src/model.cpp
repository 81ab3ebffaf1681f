// Loading, re-batching, shape inference with constant folding, and the layer IR.
#include "floorline/model_processor/model.hpp"

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <onnx/defs/parser.h>

#include "composite.hpp"
#include "floorline/common/utf8.hpp"
#include "model_stages.hpp"
#include "opset18.hpp"
#include "validate.hpp"

namespace floorline::mp {
namespace {

// After re-batching, a tensor must either not depend on the batch or carry it in exactly one dim.
Status check_rebatch(const Loaded& L, const Inference& ref, const Inference& inf) {
  const auto& graph = L.model->graph();
  for (int idx = 0; idx < graph.node_size(); ++idx) {
    if (inf.folded[idx] || ref.folded[idx]) continue;
    const auto& node = graph.node(idx);
    for (const auto& name : node.output()) {
      auto a = ref.shapes.find(name), b = inf.shapes.find(name);
      if (a == ref.shapes.end() || b == inf.shapes.end() || !a->second.shape || !b->second.shape) continue;
      const Shape &s1 = *a->second.shape, &sb = *b->second.shape;
      if (!shape_known(s1) || !shape_known(sb) || s1 == sb) continue;
      int scaled = 0, other = 0;
      if (s1.size() == sb.size())
        for (size_t k = 0; k < s1.size(); ++k) {
          if (s1[k] == sb[k]) continue;
          if (sb[k] == s1[k] * (inf.batch / ref.batch) && inf.batch % ref.batch == 0)
            ++scaled;
          else
            ++other;
        }
      if (s1.size() != sb.size() || scaled != 1 || other != 0)
        return make_error(
            "not re-batchable at batch {}: node {} ({}) output '{}' is {} at batch {} but {} at batch {} "
            "(a constant in the model pins the batch size)",
            inf.batch, node_label(node, idx), node.op_type(), name, shape_string(s1), ref.batch,
            shape_string(sb), inf.batch);
    }
  }
  return {};
}

// The graph's inputs and outputs as inferred, and the bytes of its initializers.
void graph_values(const Loaded& L, const Inference& inf, ModelIR& ir) {
  const auto& g = L.model->graph();
  auto value = [&](const std::string& name) {
    GraphValue v;
    v.name = name;
    if (auto it = inf.shapes.find(name); it != inf.shapes.end()) {
      v.dtype = it->second.dtype;
      if (it->second.shape && shape_known(*it->second.shape)) {
        v.shape = *it->second.shape;
        v.shape_known = true;
      }
    }
    return v;
  };
  for (const auto& in : g.input())
    if (!L.initializers.count(in.name())) ir.inputs.push_back(value(in.name()));
  for (const auto& out : g.output()) ir.outputs.push_back(value(out.name()));
  for (const auto& t : g.initializer()) {
    const int64_t n = tensor_numel(t);
    const int64_t size = dtype_size(static_cast<DataType>(t.data_type()));
    int64_t bytes = 0;  // saturating: a hostile model may declare more than int64 counts
    if (n < 0 || __builtin_mul_overflow(n, size, &bytes) ||
        __builtin_add_overflow(ir.weight_bytes, bytes, &ir.weight_bytes))
      ir.weight_bytes = INT64_MAX;
  }
}

Status check_options(const ProcessOptions& opts) {
  if (opts.batches.empty()) return make_error("no batch size requested");
  for (auto b : opts.batches)
    if (b < 1 || b > kMaxDim) return make_error("batch size {} is outside 1..{}", b, kMaxDim);
  if (opts.max_detections < 1 || opts.max_detections > kMaxDim)
    return make_error("--max-detections {} is outside 1..{}", opts.max_detections, kMaxDim);
  return {};
}

// The layer IR at every batch from the model and its inference. `setup_ms`: loading and inference
// time, charged to the first batch's process_ms.
Result<std::vector<ModelIR>> build_models(const Loaded& L, const ProcessOptions& opts,
                                          const std::vector<Result<Inference>>& inferred, double setup_ms) {
  const auto batches = inference_batches(opts.batches);
  // The inference of batch b, or its error (batch 1's error stands for every batch: it is the reference).
  auto inference_at = [&](int64_t b) -> Result<const Inference*> {
    const size_t k = static_cast<size_t>(std::find(batches.begin(), batches.end(), b) - batches.begin());
    if (!inferred[0]) return inferred[0].error();
    if (k >= inferred.size()) return make_error("shape inference stopped before batch {}", b);  // not reached
    if (!inferred[k]) {
      const auto& msg = inferred[k].error().message;
      // A crash, time-out or memory cap is no statement about the batch size.
      if (msg.rfind("ONNX shape inference", 0) == 0 || msg.rfind("shape inference did not", 0) == 0 ||
          msg.rfind("shape inference exceeded", 0) == 0)
        return inferred[k].error();
      return make_error("not re-batchable at batch {}: {}", b, msg);
    }
    return &inferred[k].value();
  };
  const std::string fingerprint = graph_fingerprint(L.model->graph());
  std::vector<ModelIR> out;
  for (int64_t b : opts.batches) {
    const auto tb = Clock::now();
    FL_ASSIGN_OR_RETURN(const Inference* r1, inference_at(1));
    FL_ASSIGN_OR_RETURN(const Inference* inf, inference_at(b));
    if (b != 1) FL_TRY(check_rebatch(L, *r1, *inf));
    ModelIR ir;
    ir.name = scenario_name(L.name, L.dims);
    ir.path = L.path;
    ir.batch = b;
    ir.dims = L.dims;
    ir.ir_version = L.model->ir_version();
    ir.opset = L.opset;
    ir.node_count = L.model->graph().node_size();
    ir.fingerprint = fingerprint;
    ir.warnings = L.warnings;
    ir.merged_branch = L.merged_branch;
    graph_values(L, *inf, ir);
    FL_TRY(build_layers(L, *inf, ir));
    int64_t assumed = 0;
    for (const auto& l : ir.layers)
      if (!l.folded && data_dependent(l.op_type) && l.shapes_known) ++assumed;
    if (assumed > 0)
      ir.assumption = fmt::format(
          "--max-detections {}: {} NonZero/NonMaxSuppression layer(s) assumed to select {} element(s) "
          "(fewer where their input has fewer)",
          opts.max_detections, assumed, opts.max_detections);
    ir.process_ms = ms_since(tb) + (out.empty() ? setup_ms : 0.0);
    out.push_back(std::move(ir));
  }
  return out;
}

Result<std::vector<ModelIR>> process_loaded(Loaded& L, const ProcessOptions& opts, Clock::time_point t0) {
  FL_TRY(check_options(opts));
  auto inferred = infer_all(L, opts);
  return build_models(L, opts, inferred, ms_since(t0));
}

// An error fit for every output: one line, valid UTF-8 (a file name or a library's message may
// carry any bytes).
Error safe_error(Error e);

// The model in each of its scenarios of named dims in turn (every batch of each), on the same
// loaded model; errors name the file (`ctx`) and the scenario.
// A merged decoder's If picks its branch by the scenario's past length (composite.hpp): the
// branch is inlined into a copy of the model as loaded (its composite ops not yet expanded:
// validate_and_prepare leaves them), whose opset-18 forms are read again over the new node list and
// whose composite ops are then expanded, so that read_as_17 indexes the final graph.
Status pick_merged_branch(Loaded& L, const onnx::ModelProto& as_loaded,
                          const std::vector<std::string>& warnings) {
  L.model->CopyFrom(as_loaded);
  L.warnings = warnings;
  FL_ASSIGN_OR_RETURN(auto picked, inline_merged_decoder_if(*L.model, L.dims));
  L.merged_branch.clear();
  if (picked) {
    L.warnings.push_back(picked->note);
    L.merged_branch = picked->branch;
  }
  if (L.opset > kMaxKnownOpset) L.read_as_17 = rewrite_opset18(*L.model, &L.external, L.warnings);
  expand_composite_ops(*L.model, L.opset, L.read_as_17, L.warnings);
  L.initializers.clear();
  for (const auto& t : L.model->graph().initializer()) L.initializers[t.name()] = &t;
  return {};
}

Result<std::vector<ModelIR>> process_scenarios(Loaded& L, const ProcessOptions& opts, Clock::time_point t0,
                                               const std::string& ctx) {
  std::vector<ModelIR> out;
  const auto scenarios = L.scenarios;
  std::optional<onnx::ModelProto> as_loaded;
  const std::vector<std::string> warnings = L.warnings;
  if (merged_decoder_if(L.model->graph()) >= 0) as_loaded = *L.model;
  for (const auto& dims : scenarios) {
    L.dims = dims;
    Result<std::vector<ModelIR>> result = std::vector<ModelIR>{};
    if (as_loaded) {
      auto picked = pick_merged_branch(L, *as_loaded, warnings);
      if (!picked) result = picked.error();
    }
    if (result) result = process_loaded(L, opts, t0);
    if (!result) {
      const std::string where = dims.empty() ? ctx : fmt::format("{} {}", ctx, scenario_name("", dims));
      return safe_error(result.error().with_context(where));
    }
    for (auto& ir : *result) out.push_back(std::move(ir));
  }
  return out;
}

// An error fit for every output: one line, valid UTF-8 (a file name or a library's message may
// carry any bytes).
Error safe_error(Error e) {
  e.message = to_valid_utf8(clean_onnx_message(std::move(e.message)));
  return e;
}
}  // namespace

int64_t GraphValue::bytes() const {
  if (!shape_known) return 0;
  const int64_t n = numel(shape);
  return n >= 0 ? n * dtype_size(dtype) : 0;
}

int64_t ModelIR::total_flops() const {
  int64_t f = 0;
  for (const auto& l : layers)
    if (l.cost_bearing()) f += l.flops;
  return f;
}

int64_t ModelIR::total_bytes() const {
  int64_t b = 0;
  for (const auto& l : layers)
    if (l.cost_bearing()) b += l.bytes;
  return b;
}

Result<std::vector<ModelIR>> process_model(const std::filesystem::path& path, const ProcessOptions& opts) {
  const auto t0 = Clock::now();
  const std::string ctx = path.string();
  try {
    auto loaded = load_file(path, opts);
    if (!loaded) return safe_error(loaded.error().with_context(ctx));
    return process_scenarios(*loaded, opts, t0, ctx);
  } catch (const std::bad_alloc&) {
    return make_error("{}: out of memory while loading the model", to_valid_utf8(ctx));
  } catch (const std::exception& e) {
    return safe_error(make_error("{}: {}", ctx, clean_onnx_message(e.what())));
  }
}

void process_models(const std::vector<std::filesystem::path>& paths, const ProcessOptions& opts,
                    const std::function<void(size_t, Result<std::vector<ModelIR>>)>& done) {
  register_contrib_schemas();  // before a worker is forked (composite.hpp)
  // A sweep of named dims (a model in several scenarios) is processed model by model.
  const bool sweep =
      std::any_of(opts.dims.begin(), opts.dims.end(), [](const auto& d) { return d.second.size() > 1; });
  if (!opts.isolate || sweep) {
    for (size_t i = 0; i < paths.size(); ++i) done(i, process_model(paths[i], opts));
    return;
  }
  // Each stage's failure is that model's error, as in process_model.
  auto guarded = [](const std::filesystem::path& path, auto&& stage) -> decltype(stage()) {
    const std::string ctx = path.string();
    try {
      auto r = stage();
      if (!r) return safe_error(r.error().with_context(ctx));
      return r;
    } catch (const std::bad_alloc&) {
      return make_error("{}: out of memory while loading the model", to_valid_utf8(ctx));
    } catch (const std::exception& e) {
      return safe_error(make_error("{}: {}", ctx, clean_onnx_message(e.what())));
    }
  };
  // Three streams of work: a reader thread loads and checks the models ahead, each worker process
  // infers one model's shapes, and this thread hands an idle worker the next model and builds the
  // layers of the one it collected. A model's layers can only be built after its inference, so on
  // a zoo whose time goes mostly to a few large models (swin_t, maxvit_t, ssdlite) the order
  // matters: an idle worker gets the largest model read so far (most nodes) next, and this thread
  // builds one large model while the workers infer others. Results are handed to `done` in file
  // order.
  // The reader stays at most kAheadBytes of model structure (payloads are not read) ahead.
  constexpr size_t kAheadBytes = size_t{16} << 20;
  struct Read {
    size_t index;
    Result<Loaded> loaded;
    double load_ms = 0;
    size_t bytes = 0;
    int nodes = 0;
  };
  std::mutex queue_mutex;
  std::condition_variable queue_changed;
  std::vector<Read> queue;  // read and not yet handed to the worker
  size_t queued_bytes = 0;
  bool read_all = false, stopping = false;
  // Held by the reader except while it waits for room, and by this thread while it forks a worker:
  // no other thread may be inside a library then (IsolatedWorker::needs_fork).
  std::mutex fork_mutex;
  // The schema registry is built before the reader starts (models of opset 18 and newer run ONNX's
  // inference while they are read) and before the worker is forked, which is done before the reader
  // starts (a failure to fork is reported by the first submit).
  std::lock_guard<std::mutex> lock(worker_mutex());
  build_schema_registry();
  // The process's worker, and where inference_worker_count says so a second one, this call's own
  // (forked once per call, ended with it): ONNX's inference of two models at once.
  IsolatedWorker extra(serve_inference);
  struct ExtraForks {
    IsolatedWorker& w;
    ~ExtraForks() { g_extra_forks += w.forks(); }
  } count_extra{extra};
  std::vector<IsolatedWorker*> workers = {&inference_worker()};
  if (inference_worker_count(paths.size(), opts) > 1) workers.push_back(&extra);
  for (auto* w : workers) (void)w->prepare(isolation_limits(opts));
  std::thread reader([&] {
    for (size_t i = 0; i < paths.size(); ++i) {
      {
        std::unique_lock<std::mutex> lk(queue_mutex);
        queue_changed.wait(lk, [&] { return stopping || queue.empty() || queued_bytes < kAheadBytes; });
        if (stopping) return;
      }
      std::lock_guard<std::mutex> quiet(fork_mutex);
      const auto t0 = Clock::now();
      std::optional<Result<Loaded>> r;
      try {
        r = guarded(paths[i], [&]() -> Result<Loaded> {
          FL_ASSIGN_OR_RETURN(auto L, load_file(paths[i], opts));
          FL_TRY(check_options(opts));
          return L;
        });
      } catch (...) {
        r = Result<Loaded>(
            make_error("{}: unexpected error while loading the model", to_valid_utf8(paths[i].string())));
      }
      Read read{i, std::move(*r), ms_since(t0)};
      if (read.loaded) {
        read.bytes = read.loaded.value().structure_bytes;
        read.nodes = read.loaded.value().model->graph().node_size();
      }
      {
        std::lock_guard<std::mutex> lk(queue_mutex);
        queued_bytes += read.bytes;
        queue.push_back(std::move(read));
      }
      queue_changed.notify_all();
    }
    {
      std::lock_guard<std::mutex> lk(queue_mutex);
      read_all = true;
    }
    queue_changed.notify_all();
  });
  // The reader ends with this function, also when `done` throws.
  struct Join {
    std::thread& t;
    std::mutex& m;
    std::condition_variable& cv;
    bool& stopping;
    ~Join() {
      {
        std::lock_guard<std::mutex> lk(m);
        stopping = true;
      }
      cv.notify_all();
      t.join();
    }
  } join{reader, queue_mutex, queue_changed, stopping};
  // The read model with the most nodes (the first read among equals); nullopt once every model has
  // been taken, or, unless `wait`, when none is read yet.
  auto take_largest = [&](bool wait) -> std::optional<Read> {
    std::unique_lock<std::mutex> lk(queue_mutex);
    if (wait) queue_changed.wait(lk, [&] { return !queue.empty() || read_all; });
    if (queue.empty()) return std::nullopt;
    auto it = std::max_element(queue.begin(), queue.end(),
                               [](const Read& a, const Read& b) { return a.nodes < b.nodes; });
    Read r = std::move(*it);
    queue.erase(it);
    queued_bytes -= r.bytes;
    lk.unlock();
    queue_changed.notify_all();
    return r;
  };

  std::map<size_t, Result<std::vector<ModelIR>>> finished;  // not yet handed to `done`
  size_t next_done = 0;
  auto deliver = [&] {
    for (auto it = finished.find(next_done); it != finished.end(); it = finished.find(next_done)) {
      auto result = std::move(it->second);
      finished.erase(it);
      done(next_done++, std::move(result));
    }
  };
  // A model's process_ms counts its loading, its inference from submission to collection, and
  // the building of its layers; not the time it waited to be taken.
  struct InFlight {
    size_t index;
    Loaded L;
    double load_ms;
    Clock::time_point submitted;
  };
  std::vector<std::optional<InFlight>> flights(workers.size());  // the model each worker is inferring
  // The next model for a worker with its request, encoded while the workers work: the largest
  // model read so far. Models that failed to load, or to be encoded, are finished.
  struct Prepared {
    Read read;
    std::string request;
  };
  std::optional<Prepared> prepared;
  const auto batches = inference_batches(opts.batches);
  auto prepare_next = [&](bool wait) {
    while (!prepared) {
      auto next = take_largest(wait);
      if (!next) return;
      const size_t i = next->index;
      if (!next->loaded) {
        finished.emplace(i, Result<std::vector<ModelIR>>(next->loaded.error()));
        continue;
      }
      std::string request;
      auto st = guarded(paths[i], [&]() -> Status {
        request = encode_request(next->loaded.value(), opts, batches);
        return {};
      });
      if (st)
        prepared = Prepared{std::move(*next), std::move(request)};
      else
        finished.emplace(i, Result<std::vector<ModelIR>>(st.error()));
    }
  };
  // Gives every idle worker a model, while there are models.
  auto submit_next = [&] {
    for (size_t k = 0; k < workers.size(); ++k) {
      IsolatedWorker& worker = *workers[k];
      while (!flights[k]) {
        prepare_next(true);
        if (!prepared) return;
        Prepared p = std::move(*prepared);
        prepared.reset();
        const size_t i = p.read.index;
        std::unique_lock<std::mutex> quiet;
        if (worker.needs_fork(isolation_limits(opts))) quiet = std::unique_lock<std::mutex>(fork_mutex);
        const auto at = Clock::now();
        auto st =
            guarded(paths[i], [&]() -> Status { return worker.submit(p.request, isolation_limits(opts)); });
        if (st)
          flights[k] = InFlight{i, std::move(p.read.loaded.value()), p.read.load_ms, at};
        else
          finished.emplace(i, Result<std::vector<ModelIR>>(st.error()));
      }
    }
  };
  submit_next();
  std::vector<IsolatedWorker*> busy;
  std::vector<size_t> busy_index;
  for (;;) {
    busy.clear();
    busy_index.clear();
    for (size_t k = 0; k < workers.size(); ++k)
      if (flights[k]) {
        busy.push_back(workers[k]);
        busy_index.push_back(k);
      }
    if (busy.empty()) break;
    prepare_next(false);
    const size_t k = busy_index[busy.size() == 1 ? 0 : IsolatedWorker::wait_any(busy)];
    const auto run = workers[k]->collect();
    InFlight mine = std::move(*flights[k]);
    flights[k].reset();
    const double setup_ms = mine.load_ms + ms_since(mine.submitted);
    submit_next();  // before this thread decodes the answer and builds the layers
    // No model left for it: the idle worker exits now, beside the building of the last layers,
    // instead of at the end of this call or of the process.
    if (!flights[k] && !prepared) {
      std::lock_guard<std::mutex> lk(queue_mutex);
      if (read_all && queue.empty()) workers[k]->release();
    }
    const auto inferred = decode_inference(run, opts);
    finished.emplace(mine.index, guarded(paths[mine.index],
                                         [&] { return build_models(mine.L, opts, inferred, setup_ms); }));
    deliver();
  }
  deliver();
}

Result<std::vector<ModelIR>> process_model_text(std::string_view text, std::string_view name,
                                                const ProcessOptions& opts) {
  const auto t0 = Clock::now();
  try {
    Loaded L;
    L.name = std::string(name);
    L.path = std::string(name);
    const std::string copy(text);
    auto status = onnx::OnnxParser::Parse(*L.model, copy.c_str());
    if (!status.IsOK()) return make_error("{}: ONNX text does not parse: {}", name, status.ErrorMessage());
    auto st = validate_and_prepare(L, opts.max_folded_elements);
    if (!st) return safe_error(st.error().with_context(name));
    auto scenarios = dim_scenarios(L, opts.dims);
    if (!scenarios) return safe_error(scenarios.error().with_context(name));
    L.scenarios = std::move(*scenarios);
    return process_scenarios(L, opts, t0, std::string(name));
  } catch (const std::exception& e) {
    return make_error("{}: {}", name, clean_onnx_message(e.what()));
  }
}

}  // namespace floorline::mp
