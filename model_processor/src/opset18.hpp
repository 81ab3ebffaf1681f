// Floorline's own reading of the opset-18 forms of a few ops, which ONNX 1.12 (opsets <= 17) does
// not know. Internal to model_processor.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "const_eval.hpp"

namespace floorline::mp {

// Rewrites, in a model of default-domain opset >= 18 (its graph's top level), the opset-18 forms
// that have an exact opset-17 equivalent, so that ONNX 1.12's shape inference and Floorline's
// normalizer read them with their opset-17 definitions (onnx/docs/Changelog.md, opset 18):
// - ReduceMean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare with `axes` as a constant input →
//   the `axes` attribute (no axes input: every axis, as in opset 17);
// - Split with `num_outputs` → the opset-17 equal split (num_outputs dropped; the outputs are
//   listed, so their number is the same; an uneven split leaves the last output smaller in opset
//   18 and is refused by opset 17's shape inference, which then reports the node);
// - Pad with a constant `axes` input and constant `pads` → pads over every axis (rank from the
//   model's value_info, inputs or a first shape inference run);
// - Resize with antialias = 0 and keep_aspect_ratio_policy = "stretch" (the opset-13 behaviour)
//   → those attributes dropped; with `axes`, constant scales → scales over every axis;
// - ScatterElements as it is (opset 18 adds the reductions max and min, which the layer kind
//   reads; shapes as in opset 16).
// Returns the indices of the top-level nodes of those ops that now read correctly as opset 17
// (rewritten, or already in a form both opsets read alike); nodes of those ops not listed stay
// Unsupported, as before. `external` reads constant values stored as external data.
std::set<int> rewrite_opset18(onnx::ModelProto& model, ExternalDataScope* external,
                              std::vector<std::string>& warnings);

}  // namespace floorline::mp
