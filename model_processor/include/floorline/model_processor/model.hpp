// floorline/model_processor/model.hpp — load an ONNX model and turn it into the layer IR.
//
// Loading uses ONNX's own protobuf classes and shape inference (onnx::shape_inference::InferShapes,
// ONNX 1.12, opsets 7–17). Weights are never needed except where a constant tensor carries a shape
// (Reshape/Expand/Slice/Pad/Resize inputs): initializers stored as external data are read only then,
// and only the bytes of that tensor. A shape-only copy of a model (external data file absent) loads.
// Models are untrusted input (docs/SECURITY.md): Floorline validates a model before ONNX's shape
// inference sees it, and runs that inference in a worker process per model, so that a crash,
// hang or runaway allocation inside ONNX becomes that model's one-line error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "floorline/common/result.hpp"
#include "floorline/model_processor/layer.hpp"

namespace floorline::mp {

// The values of a model's named symbolic input dims in one scenario, sorted by name
// ({{"past_sequence_length", 512}, {"sequence_length", 1}}); empty for a model that has none.
using DimValues = std::vector<std::pair<std::string, int64_t>>;

// A model's name in one scenario of named dims: the file stem, then the values in brackets,
// separated by ';' ("llama_1b_decode[past_sequence_length=512;sequence_length=1]"); the stem alone
// when `dims` is empty. This name is the model's identity in the database and every report, so a
// scenario's results never mix with another's.
std::string scenario_name(const std::string& stem, const DimValues& dims);

// The named dims (ProcessOptions::dims) that apply to the model of file stem `stem`: every plain
// "NAME", then every "stem:NAME" as "NAME" over it. Scoped keys of other models are left out.
std::map<std::string, std::vector<int64_t>> dims_for(const std::string& stem,
                                                     const std::map<std::string, std::vector<int64_t>>& dims);

// A graph input or output of a processed model, at its batch and scenario.
struct GraphValue {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;  // -1 where a dim is unknown; empty for a scalar or an unknown rank
  bool shape_known = false;
  // numel × element size; 0 where the shape is unknown.
  int64_t bytes() const;
};

// A model processed at one batch size (and one value of each of its named dims).
struct ModelIR {
  std::string name;  // scenario_name(file stem, dims): "resnet50",
                     // "gpt2_small_decode[past_sequence_length=512;sequence_length=1]"
  std::filesystem::path path;
  int64_t batch = 1;
  DimValues dims;  // the named dims set in this scenario (ProcessOptions::dims)
  // The graph's inputs (initializers excluded) and outputs with their inferred shapes: a decoder's
  // KV cache is among them (analyzer/llm.hpp).
  std::vector<GraphValue> inputs, outputs;
  // Σ bytes of the initializers (dims × element size, read even where the payload is absent): the
  // parameters one run of the graph reads.
  int64_t weight_bytes = 0;
  int64_t ir_version = 0;
  int64_t opset = 0;   // default-domain opset of the model
  int node_count = 0;  // ONNX nodes in the main graph (subgraph nodes not included)
  // 16 hex digits: hash of the graph's structure (nodes, attributes, initializer names/types/dims,
  // never weight values). Equal for every batch size and for re-exports with other weights.
  std::string fingerprint;
  std::vector<Layer> layers;          // topological order; subgraph layers follow their If/Loop node
  std::vector<std::string> warnings;  // one line each; already names the node
  // A merged decoder (a top-level If on its use_cache input, inlined per scenario): the branch this
  // scenario runs, "then-branch (with the cache)" where its past length is above 0, else
  // "else-branch (without the cache)"; "" for any other model. The reports print it.
  std::string merged_branch;
  // The assumption the shapes rest on, when any ("" when none): the --max-detections count taken
  // for the data-dependent sizes of NonZero / NonMaxSuppression layers. Reports print it.
  std::string assumption;
  // Rewrites of the graph that the layers reflect, one line each ("18 GELU chain(s) ... collapsed
  // ..."): `floorline layers` prints them.
  std::vector<std::string> notes;
  // Wall time (ms) to build the IR at this batch; the first batch's also holds loading the model
  // and shape inference at every requested batch (done together, in one child process).
  double process_ms = 0;

  int64_t total_flops() const;  // Σ FLOPs of cost-bearing layers with known shapes
  int64_t total_bytes() const;
};

struct ProcessOptions {
  // Each graph input's leading dim (symbolic or 1) is set to B, unless `dims` names it.
  std::vector<int64_t> batches = {1};
  // Values of named symbolic input dims (`--dim NAME=V1,V2`): a dim_param NAME takes its value at
  // every axis of every graph input it appears at. Several values sweep: a model is processed in
  // every combination of the values of the dims it uses (in the order given, the last dim varying
  // fastest), each combination a scenario of its own (scenario_name). A symbolic dim other than a
  // leading one, left without a value, is an error naming it and its input; so is a value for a
  // dim that is some input's leading (batch) dim, which --batch sets. Values 0..2^31: zero-size
  // dims are legal ONNX (an empty KV cache). A key "MODEL:NAME" applies to the model whose file
  // stem is MODEL only, over a plain "NAME" (dims_for): a prefill graph and a decode graph that
  // both name `sequence_length` take different values in one run.
  std::map<std::string, std::vector<int64_t>> dims;
  // Constant tensors larger than this many elements are not evaluated at load time (they stay
  // run-time layers); a cap on the memory that constant folding may take.
  int64_t max_folded_elements = 1 << 20;
  // All constants folded in one shape inference together (elements): 16 Mi, at most ~128 MiB.
  int64_t max_folded_total = 1 << 24;
  // External data one model may load (bytes): only small shape constants are ever read, and only
  // from regular files inside the model's folder (docs/SECURITY.md).
  int64_t max_external_bytes = int64_t{64} << 20;
  // Shape inference (ONNX 1.12's, which crashes, loops or allocates without bound on some hostile
  // models) runs in a worker process that serves every model of the process, so that a crash
  // becomes that model's error ("ONNX shape inference crashed (SIGSEGV)") and the zoo goes on with
  // a new worker; a model's inference is stopped (the worker killed) after inference_timeout_s
  // seconds, and the worker may add at most inference_memory_mib MiB of address space to what it
  // inherits (docs/SECURITY.md). isolate = false runs it in-process (the fuzzer's choice
  // when it hunts crashes of the inference itself).
  bool isolate = true;
  // How many elements NonZero and NonMaxSuppression select, whose count depends on the data: their
  // output's data-dependent dimension is min(max_detections, the input's element count; for NMS the
  // batches × classes × boxes), and everything downstream is shaped from it. 100 is torchvision's
  // detections_per_img for Faster/Mask R-CNN, RetinaNet and FCOS. ModelIR::assumption says when a
  // model used it. 1..2^31.
  int64_t max_detections = 100;
  double inference_timeout_s = 60;
  int64_t inference_memory_mib = 768;
  // Worker processes process_models keeps busy at once (1 or 2; 0: inference_worker_count's
  // choice). Each has the limits above and the same containment.
  int inference_workers = 0;
};

// Process one .onnx file at every requested batch size. Results are in the order of
// options.batches. Errors (one line, naming the file and, where there is one, the node; invalid
// UTF-8 replaced by U+FFFD): unreadable/empty/garbage/truncated file, not a regular file,
// ir_version <= 0, no graph, no or a zero opset, a structure Floorline refuses before shape
// inference (docs/SECURITY.md: dims, ranks, spatial attributes, values produced twice, self-loops,
// cycles), external data missing where values are needed or outside the model's folder,
// inconsistent shapes, shape inference crashed / out of time / out of memory, FLOPs or bytes past
// int64, or a batch size the model cannot take (constants pinning the batch: "not re-batchable at
// batch B"). Batch sizes must be 1..2^31.
Result<std::vector<ModelIR>> process_model(const std::filesystem::path& path, const ProcessOptions& options);

// Worker processes forked for shape inference so far in this process (ProcessOptions::isolate):
// one serves every model (process_models may add a second per call: inference_worker_count), and a
// new one is forked only after a model crashed it, ran it out of time or memory, or changed
// inference_memory_mib. For tests and diagnostics.
int inference_worker_forks();
// Of those, the forks of process_models' second workers (0 while every call used one worker).
int second_inference_worker_forks();

// How many worker processes process_models infers with for `models` models: options'
// inference_workers where set; else two where there are several models and the process may run on
// at least four CPUs (sched_getaffinity: room for this thread and the reader beside two workers),
// else one. A second worker is the call's own, forked once per call. On the 2-CPU machine it was
// measured on, a second worker made `floorline layers` no faster and cost 15% more CPU (the thread
// that builds the layers and the reader compete with it); with another process busy, it was slower.
int inference_worker_count(size_t models, const ProcessOptions& options);

// process_model on each of `paths`, calling done(k, result of paths[k]) in order. With
// options.isolate the workers (inference_worker_count) each infer one model's shapes while a thread
// of this process reads and checks the next ones and the calling thread builds the layers of the
// model inferred before; an idle worker gets the largest model read so far first, so that large
// models overlap each other. `done` runs on the calling thread, in the order of `paths`.
void process_models(const std::vector<std::filesystem::path>& paths, const ProcessOptions& options,
                    const std::function<void(size_t, Result<std::vector<ModelIR>>)>& done);

// Process an in-memory ONNX text model (onnx/defs/parser.h syntax), as the tests do.
// `name` stands in for the file name in messages.
Result<std::vector<ModelIR>> process_model_text(std::string_view onnx_text, std::string_view name,
                                                const ProcessOptions& options);

}  // namespace floorline::mp
