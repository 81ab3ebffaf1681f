// floorline/kernels/support.hpp — what a backend (or the reference) does with a layer kind.
//
// Each backend declares, for every LayerKind, in one table, either how it maps the kind (its
// library calls or kernels) or why it does not (ggml's supports_op): onednn_support(),
// cuda_support(), reference_support(). The tables answer without a device, and the planner's
// "unsupported" reason for a kind a backend does not map is the table's reason.
#pragma once

#include <string_view>

#include "floorline/common/layer_kind.hpp"

namespace floorline::kernels {

struct KindSupport {
  // Non-empty when the kind is mapped: what it maps to ("convolution_direct, convolution_winograd").
  std::string_view mapping;
  // When not mapped: why ("not mapped: oneDNN 2.6 has no ..."). When mapped, an optional caveat
  // ("no oneDNN primitive: timed as a copy of its output").
  std::string_view reason;

  bool supported() const { return !mapping.empty(); }
};

}  // namespace floorline::kernels
