#include "test_helpers.hpp"

#include <fmt/format.h>

namespace floorline::mp::test {

std::vector<ModelIR> process_ok(const std::string& text, std::vector<int64_t> batches) {
  ProcessOptions o;
  o.batches = std::move(batches);
  auto r = process_model_text(text, "test.onnx", o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return {};
  return std::move(r).value();
}

std::string process_error(const std::string& text, std::vector<int64_t> batches) {
  ProcessOptions o;
  o.batches = std::move(batches);
  auto r = process_model_text(text, "test.onnx", o);
  EXPECT_FALSE(r.ok()) << "expected an error";
  return r.ok() ? std::string() : r.error().message;
}

const Layer& only(const ModelIR& m, const std::string& op_type) {
  const Layer* found = nullptr;
  int n = 0;
  for (const auto& l : m.layers)
    if (l.op_type == op_type) {
      found = &l;
      ++n;
    }
  EXPECT_EQ(n, 1) << "layers of op " << op_type;
  static const Layer empty;
  return found ? *found : empty;
}

std::string model_text(const std::string& graph, int opset) {
  return fmt::format("<ir_version: 8, opset_import: [\"\" : {}]>\n{}", opset, graph);
}

}  // namespace floorline::mp::test
