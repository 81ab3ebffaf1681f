// The result of shape inference at one batch size, and its wire form: shape inference runs in a
// child process (isolate.hpp) that sends this back through a pipe. Internal to model_processor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "const_eval.hpp"
#include "floorline/model_processor/tensor.hpp"

namespace floorline::mp {

struct ShapeInfo {
  DataType dtype = DataType::kUndefined;
  std::optional<Shape> shape;
};
using ShapeMap = std::unordered_map<std::string, ShapeInfo>;

struct Inference {
  int64_t batch = 1;
  ShapeMap shapes;
  std::unordered_map<std::string, ConstTensor> values;  // constants with known values
  std::unordered_set<std::string> constant;             // every value known to be constant
  std::vector<bool> folded;                             // per main-graph node
  std::vector<std::string> missing_values;              // "initializer 'x' ... missing" notes
};

// Appends the wire form of `inf` to `out` (little-endian fixed-width integers, length-prefixed
// strings; no payload of weights: only shapes and the folded constants, which the folding budget
// keeps small).
void encode_inference(const Inference& inf, std::string& out);
void encode_string(const std::string& s, std::string& out);

// Reads what encode_* wrote, advancing `in`; nullopt on malformed or short input.
class WireReader {
 public:
  explicit WireReader(std::string_view in) : in_(in) {}
  bool done() const { return in_.empty(); }
  std::optional<int64_t> i64();
  std::optional<std::string> string();
  std::optional<std::string_view> bytes();  // what string() reads, in place (valid while the input is)
  std::optional<Inference> inference();

 private:
  std::string_view in_;
};
void encode_i64(int64_t v, std::string& out);

}  // namespace floorline::mp
