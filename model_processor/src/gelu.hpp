// GELU collapse: the five-node decomposition of GELU that exporters write before ONNX has a Gelu
// op (opset 20) becomes one Gelu layer, as ONNX Runtime's Gelu fusion makes it one kernel.
// Internal to model_processor; the rule is in docs/LAYERS.md ("GELU chains").
#pragma once

#include <string>
#include <unordered_set>

#include "floorline/model_processor/model.hpp"
#include "qdq.hpp"

namespace floorline::mp {

// Rewrites `ir`'s layers in place: each chain
//   t = Div(x, √2) or Mul(x, 1/√2);  u = Erf(t);  v = Add(u, 1);  y = x · v · 0.5
// (the last as two Muls in any association: Mul(Mul(x, v), 0.5), Mul(Mul(v, 0.5), x) or
// Mul(v, Mul(x, 0.5)); operands of Add and Mul in either order; each constant a scalar or a
// one-element tensor within 1e-5 relative of its value), whose five layers are compute layers of
// the same (sub)graph with known shapes, whose intermediate values each have exactly one consumer
// and are not graph outputs, and whose x has y's shape, becomes one Gelu layer (approximate =
// "none") named after the Erf node, reading x and writing y. The other four layers are removed;
// the layers are renumbered and every `preds` list follows. Returns the number of chains collapsed.
int collapse_gelu(ModelIR& ir, const ValueLookup& value_of,
                  const std::unordered_set<std::string>& graph_outputs);

}  // namespace floorline::mp
