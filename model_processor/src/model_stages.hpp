// The steps of process_model, one file each, and what they share: the loaded model (model_load.cpp),
// shape inference at one batch size (infer_batch.cpp), the inference worker that runs it in a child
// process (inference_worker.cpp) and the layer IR built from its result (ir_build.cpp); model.cpp
// puts them together. Internal to model_processor.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <google/protobuf/arena.h>
#include <onnx/onnx_pb.h>

#include "const_eval.hpp"
#include "floorline/common/result.hpp"
#include "floorline/model_processor/model.hpp"
#include "inference.hpp"
#include "isolate.hpp"

namespace floorline::mp {

// The newest default-domain opset ONNX 1.12 knows.
constexpr int64_t kMaxKnownOpset = 17;

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Ops whose output size depends on the input's values (ProcessOptions::max_detections).
inline bool data_dependent(const std::string& op) {
  return op == "NonZero" || op == "NonMaxSuppression";
}

inline bool default_domain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

// An ONNX message on one line.
inline std::string clean_onnx_message(std::string msg) {
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  return msg;
}

// --- model_load.cpp

// Blocks of 64 KiB growing to 4 MiB: a few dozen allocations for the largest zoo graph.
google::protobuf::ArenaOptions arena_options();

// The same, starting in a block that the thread keeps for the next arena of `slot` (one arena of a
// slot alive at a time): the worker's short-lived request models and working copies reuse the same
// 8 MiB from model to model instead of allocating, faulting in and freeing theirs (glibc
// consolidating its free lists at each large free) for every model.
enum class ArenaSlot { kInference, kRequest };
google::protobuf::ArenaOptions reused_arena_options(ArenaSlot slot);

// A parsed, validated model with its large initializer payloads dropped.
struct Loaded {
  Loaded() : Loaded(arena_options()) {}
  explicit Loaded(const google::protobuf::ArenaOptions& options)
      : arena(std::make_unique<google::protobuf::Arena>(options)),
        model(google::protobuf::Arena::CreateMessage<onnx::ModelProto>(arena.get())) {}

  std::string name;
  std::filesystem::path path;
  // Where external data files may be read from (the model's folder), and how much was read.
  mutable ExternalDataScope external;
  // The model lives on its own arena, freed at once with it: a large graph freed message by
  // message (and glibc consolidating the freed chunks) cost about as much as parsing it.
  std::unique_ptr<google::protobuf::Arena> arena;
  onnx::ModelProto* model;
  int64_t opset = 0;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  std::vector<std::string> warnings;
  std::vector<std::string> unreadable_external;  // why small external tensors could not be read
  std::set<int> read_as_17;    // top-level nodes of an opset >= 18 model read as opset 17 (opset18.hpp)
  size_t structure_bytes = 0;  // of the file, without the payloads that were passed over
  // The scenarios of named dims the options give this model (dim_scenarios; one empty one for a
  // model without named dims), and the one being inferred.
  std::vector<DimValues> scenarios = {DimValues{}};
  DimValues dims;
  // The branch a merged decoder's If runs in this scenario (MergedDecoderBranch::branch); "" for any
  // other model.
  std::string merged_branch;
};

// The scenarios of `L` under the requested dim values (ProcessOptions::dims): every combination of
// the values of the named dims its graph inputs use. Errors (one line, naming the dim and the
// input): a symbolic dim other than a leading one without a value; a value given for a leading
// (batch) dim; a value outside 0..kMaxDim.
Result<std::vector<DimValues>> dim_scenarios(const Loaded& L,
                                             const std::map<std::string, std::vector<int64_t>>& dims);

// An initializer whose payload the skim left out: dims and type only.
bool payload_dropped(const onnx::TensorProto& t);

// Element count of a tensor's dims; INT64_MAX when a dim is negative or the count overflows
// (validate_graph rejects both; this only keeps a caller from acting on a wrapped count).
int64_t tensor_numel(const onnx::TensorProto& t);

// Checks a parsed model (ONNX data at all, opsets, the graph: validate.hpp), reads opset 18 forms
// as opset 17, and drops the payload of every initializer above `max_elements`.
Status validate_and_prepare(Loaded& L, int64_t max_elements);

// Reads and checks a model file, never reading the payload of a large weight.
Result<Loaded> load_file(const std::filesystem::path& path, const ProcessOptions& opts);

// --- infer_batch.cpp

// Shape inference of the model at one batch size, with constant folding.
Result<Inference> infer_at_batch(const Loaded& L, int64_t batch, const ProcessOptions& opts);

// --- inference_worker.cpp

// Batch 1 (the reference every other batch is checked against) first, then the others in order.
std::vector<int64_t> inference_batches(const std::vector<int64_t>& batches);

// A request to the inference worker, and the worker's side that answers it.
std::string encode_request(const Loaded& L, const ProcessOptions& opts, const std::vector<int64_t>& batches);
void serve_inference(std::string_view request, const std::function<bool(const std::string&)>& send);

// The process's one inference worker, and the lock its callers take (process_model may be called
// from several threads).
std::mutex& worker_mutex();
IsolatedWorker& inference_worker();
// Forks of the second workers of process_models calls so far (guarded by worker_mutex()).
extern int g_extra_forks;

// Builds ONNX's schema registry, before the first fork (see inference_worker.cpp).
void build_schema_registry();
IsolationLimits isolation_limits(const ProcessOptions& opts);

// Shape inference at every batch size, stopping at the first error (the last element then holds
// it). In the worker process unless options.isolate is false.
std::vector<Result<Inference>> infer_all(const Loaded& L, const ProcessOptions& opts);
// The worker's answer to a request, as infer_all returns it.
std::vector<Result<Inference>> decode_inference(const Result<IsolatedRun>& run, const ProcessOptions& opts);

// --- ir_build.cpp

// The layers of `ir` (with their predecessors, costs and QDQ fusion) from the model and its
// inference at ir.batch.
Status build_layers(const Loaded& L, const Inference& inf, ModelIR& ir);

// A hash of the graph's structure without the initializers' values (see ir_build.cpp).
std::string graph_fingerprint(const onnx::GraphProto& g);

}  // namespace floorline::mp
