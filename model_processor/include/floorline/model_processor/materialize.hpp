// floorline/model_processor/materialize.hpp — full-weight copies of shape-only models.
//
// The embedded zoo (models/zoo) is shape-only: every initializer larger than 1 KiB was moved to
// external data and the data files were dropped, which is all Floorline's own stages need. A real
// runtime (ONNX Runtime, the reference for the M column) needs values. materialize_model() writes
// a copy of a model whose missing external-data tensors are filled with deterministic random values
// of their dtype and dims; the graph is otherwise unchanged (same nodes, same initializer names,
// dtypes and dims: the copy has the same mp::ModelIR::fingerprint).
//
// Layout of a copy in OUT: OUT/<stem>.onnx and OUT/<stem>.onnx.data. Every external tensor of the
// copy lives in the one data file, at an offset aligned to kMaterializeAlignment bytes, so the
// protobuf stays small and models over 2 GB work; tensors that were inline stay inline. External
// tensors whose data file is present are copied into it as they are.
//
// Values (fill_values): seeded from the tensor's name (FNV-1a 64 → splitmix64), so a tensor gets
// the same values in every copy on every machine. Floats are uniform in a range that keeps
// activations finite: weights (rank ≥ 2) U(-a, a) with a = sqrt(6 / fan_in) (He-uniform; fan_in
// is the input size a weight multiplies: MatMul B's rows, Gemm B's K, else numel / dims[0]);
// normalization scales and variances U(0.5, 1.5) (positive, so that a variance under a square
// root stays real); other vectors (biases, means) U(-0.1, 0.1). A value whose magnitude is below
// the dtype's smallest normal becomes 0 (no denormals: they slow some CPUs by 10-100x). Integer and
// bool tensors get 0 or 1 (valid as indices into any non-empty axis, and as masks).
//
// Nothing outside the model's folder is read: an external location that is absolute or leaves the
// folder is an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "floorline/common/result.hpp"
#include "floorline/model_processor/tensor.hpp"

namespace floorline::mp {

// Byte alignment of every tensor's offset in a copy's data file (a page: a runtime may map it).
inline constexpr int64_t kMaterializeAlignment = 4096;

struct MaterializedModel {
  std::filesystem::path model;  // OUT/<stem>.onnx
  std::filesystem::path data;   // OUT/<stem>.onnx.data ("" when the copy has no external tensor)
  int64_t generated = 0;        // tensors filled with generated values
  int64_t copied = 0;           // external tensors whose data was present, copied as they were
  int64_t data_bytes = 0;       // size of the data file (bytes, padding included)
};

// The initializers (main graph and subgraphs) whose values are stored as external data in a file
// that is absent. Errors: unreadable or non-ONNX file; an external location outside the model's
// folder.
Result<int64_t> count_missing_tensors(const std::filesystem::path& model);

// Writes the copy of `model` into `out_dir` (created if needed; it must not be the model's own
// folder). The files are written under temporary names and renamed, so an interrupted call leaves
// no half copy under the final name. Errors (one line, naming the file and the tensor):
//   - "nothing to materialize": no tensor's data is missing (the model is complete as it is);
//   - a tensor whose dims are unknown (negative) or whose byte size overflows 64 bits;
//   - a tensor whose dtype cannot be generated (string, complex, float8, undefined);
//   - a present data file shorter than a tensor's offset + length; an unwritable `out_dir`.
Result<MaterializedModel> materialize_model(const std::filesystem::path& model,
                                            const std::filesystem::path& out_dir);

// Whether out_dir holds a copy of `model` made from the model file as it is now (the copy records
// the source's size and modification time, and the size of its data file).
bool materialized_up_to_date(const std::filesystem::path& model, const std::filesystem::path& out_dir);

// Where a tensor's values come from when generated (see the header comment for the ranges).
enum class FillRole {
  kWeight,     // rank ≥ 2: U(-a, a), a = sqrt(6 / fan_in)
  kPositive,   // normalization scale or variance: U(0.5, 1.5)
  kSmallBias,  // other rank ≤ 1 tensors: U(-0.1, 0.1)
};

// The deterministic values of a tensor named `name` with `numel` elements of `dtype`, as the bytes
// ONNX stores them (little-endian raw_data). `fan_in` is used by kWeight (≥ 1). Errors: a dtype
// that cannot be generated. For tests and for materialize_model (which generates in chunks with
// the same stream: the values do not depend on the chunk size).
Result<std::string> fill_values(std::string_view name, DataType dtype, int64_t numel, FillRole role,
                                int64_t fan_in);

}  // namespace floorline::mp
