#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floorline/model_processor/model.hpp"

namespace floorline::mp::test {

// Process ONNX text at the given batches; fails the test (and returns empty) on error.
std::vector<ModelIR> process_ok(const std::string& text, std::vector<int64_t> batches = {1});
// The error message of processing text that must fail.
std::string process_error(const std::string& text, std::vector<int64_t> batches = {1});
// The only layer of this op type (fails the test if there is not exactly one).
const Layer& only(const ModelIR& m, const std::string& op_type);
// "<ir_version: 8, opset_import: ["" : OPSET]>" + graph text.
std::string model_text(const std::string& graph, int opset = 17);

}  // namespace floorline::mp::test
