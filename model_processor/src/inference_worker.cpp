// The inference worker: shape inference of each model in a child process (isolate.hpp), its request
// and answer (model_stages.hpp).
#include <sched.h>

#include <cstring>
#include <thread>

#include <onnx/defs/schema.h>

#include "composite.hpp"
#include "model_stages.hpp"

namespace floorline::mp {
namespace {

// ---------------------------------------------------------------------------------------------
// Isolation. ONNX 1.12's shape inference (and the checker-like code around it) trusts its input
// and can crash, loop or allocate without bound on a hostile model; it runs in a forked child per
// model, which sends back one record per batch size: a kind byte (0: the Inference, 1: an error
// about the model, 2: an error that is not about the batch size), then the payload.
enum class RecordKind : int64_t { kInference = 0, kError = 1 };

}  // namespace

// Batch 1 (the reference every other batch is checked against) first, then the others in order.
std::vector<int64_t> inference_batches(const std::vector<int64_t>& batches) {
  std::vector<int64_t> out = {1};
  for (int64_t b : batches)
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  return out;
}

// A request to the inference worker: what infer_at_batch needs of the loaded model (the model as
// validated and stripped of its large payloads, so the worker re-parses only its structure) and of
// the options.
std::string encode_request(const Loaded& L, const ProcessOptions& opts, const std::vector<int64_t>& batches) {
  std::string out;
  encode_string(L.name, out);
  encode_string(L.path.string(), out);
  encode_string(L.external.dir, out);
  encode_i64(L.external.max_bytes, out);
  encode_i64(L.external.loaded_bytes, out);
  encode_i64(L.opset, out);
  encode_i64(static_cast<int64_t>(L.unreadable_external.size()), out);
  for (const auto& s : L.unreadable_external) encode_string(s, out);
  encode_i64(opts.max_folded_elements, out);
  encode_i64(opts.max_folded_total, out);
  encode_i64(opts.max_detections, out);
  encode_i64(static_cast<int64_t>(batches.size()), out);
  for (int64_t b : batches) encode_i64(b, out);
  encode_i64(static_cast<int64_t>(L.dims.size()), out);
  for (const auto& [name, value] : L.dims) {
    encode_string(name, out);
    encode_i64(value, out);
  }
  // encode_string(model bytes), serialized in place: the length is written once they are known.
  const size_t at = out.size();
  encode_i64(0, out);
  L.model->AppendToString(&out);
  const auto size = static_cast<int64_t>(out.size() - at - 8);
  std::memcpy(out.data() + at, &size, 8);
  return out;
}

// The worker's side: decodes a request and answers with one record per batch (as above), stopping
// at the first error. A request it cannot read gets no record (the parent reports an incomplete
// result).
void serve_inference(std::string_view request, const std::function<bool(const std::string&)>& send) {
  // A worker forked before the parent read its first model has not the com.microsoft schemas yet
  // (composite.hpp): without them ONNX 1.12's inference crashes on a MatMulNBits node.
  register_contrib_schemas();
  WireReader in(request);
  Loaded L(reused_arena_options(ArenaSlot::kRequest));
  ProcessOptions opts;
  std::vector<int64_t> batches;
  auto name = in.string(), path = in.string(), dir = in.string();
  auto max_bytes = in.i64(), loaded = in.i64(), opset = in.i64(), notes = in.i64();
  if (!name || !path || !dir || !max_bytes || !loaded || !opset || !notes || *notes < 0) return;
  L.name = *name;
  L.path = *path;
  L.external.dir = *dir;
  L.external.max_bytes = *max_bytes;
  L.external.loaded_bytes = *loaded;
  L.opset = *opset;
  for (int64_t k = 0; k < *notes; ++k) {
    auto note = in.string();
    if (!note) return;
    L.unreadable_external.push_back(std::move(*note));
  }
  auto max_folded = in.i64(), max_total = in.i64(), max_detections = in.i64(), count = in.i64();
  if (!max_folded || !max_total || !max_detections || !count || *count < 0) return;
  opts.max_folded_elements = *max_folded;
  opts.max_folded_total = *max_total;
  opts.max_detections = *max_detections;
  for (int64_t k = 0; k < *count; ++k) {
    auto b = in.i64();
    if (!b) return;
    batches.push_back(*b);
  }
  auto dim_count = in.i64();
  if (!dim_count || *dim_count < 0) return;
  for (int64_t k = 0; k < *dim_count; ++k) {
    auto name = in.string();
    auto value = in.i64();
    if (!name || !value) return;
    L.dims.emplace_back(std::move(*name), *value);
  }
  auto model = in.bytes();
  if (!model || model->size() > static_cast<size_t>(INT32_MAX) ||
      !L.model->ParseFromArray(model->data(), static_cast<int>(model->size())))
    return;
  for (const auto& t : L.model->graph().initializer()) L.initializers[t.name()] = &t;
  for (int64_t b : batches) {
    std::string record;
    auto r = infer_at_batch(L, b, opts);
    encode_i64(static_cast<int64_t>(r ? RecordKind::kInference : RecordKind::kError), record);
    if (r)
      encode_inference(*r, record);
    else
      encode_string(r.error().message, record);
    if (!send(record) || !r) return;
  }
}

// The process's one inference worker, and the lock its callers take (process_model may be called
// from several threads).
std::mutex& worker_mutex() {
  static std::mutex m;
  return m;
}
IsolatedWorker& inference_worker() {
  static IsolatedWorker worker(serve_inference);
  return worker;
}
// Forks of the second workers of process_models calls so far (guarded by worker_mutex()).
int g_extra_forks = 0;

// One worker serves every model of the process (docs/SECURITY.md): the schema registry (all of
// ONNX's ops) is built before the first fork, so that no worker builds and discards it.
// (Instance() alone does not build it: the first lookup does.)
void build_schema_registry() {
  (void)onnx::OpSchemaRegistry::Schema("Identity", 1, "");
}

IsolationLimits isolation_limits(const ProcessOptions& opts) {
  return IsolationLimits{opts.inference_timeout_s, opts.inference_memory_mib};
}

// Shape inference at every batch size, stopping at the first error (the last element then holds
// it). In the worker process unless options.isolate is false.
Status submit_inference(const Loaded& L, const ProcessOptions& opts);
std::vector<Result<Inference>> collect_inference(const ProcessOptions& opts);
std::vector<Result<Inference>> decode_inference(const Result<IsolatedRun>& run, const ProcessOptions& opts);

std::vector<Result<Inference>> infer_all(const Loaded& L, const ProcessOptions& opts) {
  const auto batches = inference_batches(opts.batches);
  std::vector<Result<Inference>> out;
  if (!opts.isolate) {
    for (int64_t b : batches) {
      out.push_back(infer_at_batch(L, b, opts));
      if (!out.back()) break;
    }
    return out;
  }
  std::lock_guard<std::mutex> lock(worker_mutex());
  if (auto st = submit_inference(L, opts); !st) {
    out.push_back(st.error());
    return out;
  }
  return collect_inference(opts);
}

std::vector<Result<Inference>> collect_inference(const ProcessOptions& opts) {
  return decode_inference(inference_worker().collect(), opts);
}

// Sends the model's inference to the worker; the caller holds worker_mutex() until it collects.
Status submit_inference(const Loaded& L, const ProcessOptions& opts) {
  build_schema_registry();
  return inference_worker().submit(encode_request(L, opts, inference_batches(opts.batches)),
                                   isolation_limits(opts));
}

// The worker's answer to a request, as infer_all returns it.
std::vector<Result<Inference>> decode_inference(const Result<IsolatedRun>& run, const ProcessOptions& opts) {
  const auto batches = inference_batches(opts.batches);
  std::vector<Result<Inference>> out;
  if (!run) {
    out.push_back(run.error());
    return out;
  }
  WireReader in(run->output);
  while (!in.done() && out.size() < batches.size()) {
    const auto kind = in.i64();
    if (kind && *kind == static_cast<int64_t>(RecordKind::kInference)) {
      if (auto inf = in.inference()) {
        out.emplace_back(std::move(*inf));
        continue;
      }
    } else if (kind && *kind == static_cast<int64_t>(RecordKind::kError)) {
      if (auto msg = in.string()) {
        out.push_back(Error{std::move(*msg)});
        return out;
      }
    }
    break;  // a record cut short: the child died while writing it
  }
  if (out.size() == batches.size() && run->end == IsolatedRun::End::kExited) return out;
  // The child ended before sending every batch: say how, and at which batch.
  const int64_t batch = batches[std::min(out.size(), batches.size() - 1)];
  const std::string at = batch == 1 ? "" : fmt::format(" at batch {}", batch);
  Error e;
  switch (run->end) {
    case IsolatedRun::End::kTimedOut:
      e = make_error("shape inference did not finish in {} s{}", opts.inference_timeout_s, at);
      break;
    case IsolatedRun::End::kOutOfMemory:
      e = make_error("shape inference exceeded {} MiB{}", opts.inference_memory_mib, at);
      break;
    case IsolatedRun::End::kCrashed:
      e = run->signal ? make_error("ONNX shape inference crashed ({}){}", signal_name(run->signal), at)
                      : make_error("ONNX shape inference failed (the worker process ended early){}", at);
      break;
    case IsolatedRun::End::kExited:
      e = make_error("ONNX shape inference sent an incomplete result{}", at);
      break;
  }
  out.push_back(e);
  return out;
}

int inference_worker_forks() {
  std::lock_guard<std::mutex> lock(worker_mutex());
  return inference_worker().forks() + g_extra_forks;
}

int second_inference_worker_forks() {
  std::lock_guard<std::mutex> lock(worker_mutex());
  return g_extra_forks;
}

int inference_worker_count(size_t models, const ProcessOptions& opts) {
  if (models < 2) return 1;
  if (opts.inference_workers > 0) return std::min(opts.inference_workers, 2);
  // The CPUs this process may run on (taskset, a container's cpuset), else the machine's.
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  return cpus >= 4 ? 2 : 1;
}

}  // namespace floorline::mp
