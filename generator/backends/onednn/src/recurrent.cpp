// oneDNN builder: LSTM, GRU and RNN on oneDNN's RNN primitives (vanilla_rnn, vanilla_lstm,
// vanilla_gru, lbr_gru; forward inference, one layer).
//
// ONNX and oneDNN agree on the equations (oneDNN docs, "RNN": GRU's h_t = u⊙h_{t-1} + (1−u)⊙o is
// ONNX's (1−z)⊙h + z⊙H_{t-1}; lbr_gru is ONNX linear_before_reset = 1) but not on the storage:
// - weights: ONNX W [D, G·H, I] is oneDNN's ldgoi order with L = 1, seen as ldigo by strides;
//   oneDNN's LSTM gate order is i, f, c, o where ONNX stores i, o, f, c (GRU z, r, h is oneDNN's
//   u, r, o), so LSTM weights are copied gate by gate into oneDNN's order once, before timing;
// - bias: ONNX has Wb and Rb per gate, oneDNN one (lbr_gru: a fourth, Rb of the h gate): their sum,
//   made once before timing (frameworks fold it when they load the weights);
// - outputs: ONNX Y is [T, D, N, H]; a bidirectional oneDNN layer writes [T, N, 2H] (concat), which
//   a reorder, timed with the layer, lays out as ONNX's; one direction writes Y directly.
// sequence_lens is not read: every sequence runs its full length (the most work; oneDNN has no
// per-sequence lengths). Not mapped: activations other than the ONNX defaults (RNN: Tanh, Relu or
// Sigmoid), clip, input_forget.
#include "internal.hpp"

namespace floorline::kernels::onednn_detail {
namespace {

// A state tensor (ONNX [D, N, H], layout 1: [N, D, H]) as oneDNN's ldnc [1, D, N, H].
View state_view(int64_t D, int64_t N, int64_t H, bool batch_first) {
  if (!batch_first) return reshaped({1, D, N, H});
  return View{{1, D, N, H}, {D * N * H, H, D * H, 1}, 0};
}

// The (one-element) copy or sum of an H-vector, run once.
StepDef once(StepDef s) {
  s.once = true;
  return s;
}

}  // namespace

void recurrent(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const LayerKind kind = c.p.kind;
  const bool lstm = kind == LayerKind::kLSTM, gru = kind == LayerKind::kGRU;
  const int64_t G = lstm ? 4 : gru ? 3 : 1;
  const int xi = c.p.input_index("x"), wi = c.p.input_index("w"), ri = c.p.input_index("r");
  if (xi < 0 || wi < 0 || ri < 0) unsupported(fmt::format("{} needs X, W and R", c.p.op));
  const Shape &xs = c.in_shape(xi), &rs = c.in_shape(ri);
  if (xs.size() != 3 || rs.size() != 3) unsupported("X and R must be 3-D");
  c.set_fill(c.input(static_cast<size_t>(wi)), Fill::kSmall);
  c.set_fill(c.input(static_cast<size_t>(ri)), Fill::kSmall);
  const bool batch_first = c.p.int_attr("layout") != 0;
  const int64_t T = batch_first ? xs[1] : xs[0], N = batch_first ? xs[0] : xs[1], I = xs[2];
  const int64_t D = rs[0], H = rs[2];
  const std::string direction = c.p.string_attr("direction");
  const std::string acts = c.p.string_attr("activations", "");
  algorithm rnn_activation = algorithm::eltwise_tanh;
  if (!acts.empty()) {
    const std::string first = acts.substr(0, acts.find(','));
    if (kind != LayerKind::kRNN || (first != "Relu" && first != "Sigmoid" && first != "Tanh"))
      unsupported(
          fmt::format("activations {} (oneDNN runs the ONNX defaults; a vanilla RNN also Relu or "
                      "Sigmoid)",
                      acts));
    if (acts.find(',') != std::string::npos && acts != first + "," + first)
      unsupported("different activations per direction");
    rnn_activation = first == "Relu"      ? algorithm::eltwise_relu
                     : first == "Sigmoid" ? algorithm::eltwise_logistic
                                          : algorithm::eltwise_tanh;
  }
  if (c.p.floats.count("clip")) unsupported("a cell clip (oneDNN has none)");
  if (lstm && c.p.int_attr("input_forget") != 0) unsupported("input_forget (coupled gates)");
  const bool lbr = gru && c.p.int_attr("linear_before_reset") != 0;
  const auto dir = direction == "forward"   ? dnnl::rnn_direction::unidirectional_left2right
                   : direction == "reverse" ? dnnl::rnn_direction::unidirectional_right2left
                   : direction == "bidirectional"
                       ? dnnl::rnn_direction::bidirectional_concat
                       : throw KernelError(Disposition::kUnsupported, "direction " + direction);
  if ((direction == "bidirectional") != (D == 2)) unsupported("direction and R's first dim disagree");

  // Weights: ONNX [D, G, H, I] seen as ldigo [1, D, I, G, H]; LSTM's gates reordered into a copy.
  // oneDNN gate g reads ONNX gate perm[g].
  const std::vector<int64_t> perm = lstm ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 1, 2};
  auto weights = [&](int src, int64_t in) -> std::pair<int, View> {
    const View ldigo{{1, D, in, G, H}, {D * G * H * in, G * H * in, 1, H * in, in}, 0};
    if (!lstm) return {src, ldigo};
    const int t = c.extra({D, G, H, in});
    for (int64_t d = 0; d < D; ++d)
      for (int64_t g = 0; g < G; ++g) {
        const View from{{H, in}, {in, 1}, (d * G + perm[static_cast<size_t>(g)]) * H * in};
        const View to{{H, in}, {in, 1}, (d * G + g) * H * in};
        c.b.steps.push_back(
            once(step(dnnl::reorder::primitive_desc(cpu_engine(), c.md(src, from), cpu_engine(), c.md(t, to),
                                                    primitive_attr(), true),
                      {{DNNL_ARG_FROM, src, from}, {DNNL_ARG_TO, t, to}})));
      }
    return {t, ldigo};
  };
  const auto [wl, wl_view] = weights(c.input(static_cast<size_t>(wi)), I);
  const auto [wr, wr_view] = weights(c.input(static_cast<size_t>(ri)), H);

  // Bias [1, D, Gb, H], f32: Wb + Rb per gate (lbr_gru: Wb for o, and Rb of the h gate as a fourth).
  const int64_t Gb = lbr ? 4 : G;
  const int bias = c.extra({1, D, Gb, H});
  c.set_f32_only(bias);
  const int bi = c.p.input_index("b");
  if (bi < 0) {
    const View all = reshaped({D * Gb * H});
    dnnl::eltwise_forward::desc zero(kInference, algorithm::eltwise_linear, c.md(bias, all), 0.f, 0.f);
    c.b.steps.push_back(once(make_step<dnnl::eltwise_forward::primitive_desc>(
        zero, primitive_attr(), {{DNNL_ARG_SRC, bias, all}, {DNNL_ARG_DST, bias, all}})));
  } else {
    const int src = c.input(static_cast<size_t>(bi));
    for (int64_t d = 0; d < D; ++d)
      for (int64_t g = 0; g < Gb; ++g) {
        const View to{{H}, {1}, (d * Gb + g) * H};
        // lbr_gru: gate 2 (o) is Wb of h alone, gate 3 is Rb of h alone.
        const int64_t onnx_gate = g < G ? perm[static_cast<size_t>(g)] : 2;
        const View wb{{H}, {1}, d * 2 * G * H + onnx_gate * H};
        const View rb{{H}, {1}, d * 2 * G * H + G * H + onnx_gate * H};
        if (lbr && g >= 2) {
          const View& from = g == 2 ? wb : rb;
          c.b.steps.push_back(
              once(step(dnnl::reorder::primitive_desc(cpu_engine(), c.md(src, from), cpu_engine(),
                                                      c.md(bias, to), primitive_attr(), true),
                        {{DNNL_ARG_FROM, src, from}, {DNNL_ARG_TO, bias, to}})));
          continue;
        }
        c.b.steps.push_back(once(step(dnnl::sum::primitive_desc(c.md(bias, to), {1.f, 1.f},
                                                                {c.md(src, wb), c.md(src, rb)}, cpu_engine()),
                                      {{DNNL_ARG_MULTIPLE_SRC, src, wb},
                                       {DNNL_ARG_MULTIPLE_SRC + 1, src, rb},
                                       {DNNL_ARG_DST, bias, to}})));
      }
  }

  // Peepholes (LSTM P [D, 3H], ONNX i, o, f; oneDNN [1, D, 3, H] i, f, o), copied once.
  int peep = -1;
  if (const int pi = c.p.input_index("p"); lstm && pi >= 0) {
    peep = c.extra({1, D, 3, H});
    const int src = c.input(static_cast<size_t>(pi));
    const int64_t pperm[3] = {0, 2, 1};
    for (int64_t d = 0; d < D; ++d)
      for (int64_t g = 0; g < 3; ++g) {
        const View from{{H}, {1}, (d * 3 + pperm[g]) * H}, to{{H}, {1}, (d * 3 + g) * H};
        c.b.steps.push_back(
            once(step(dnnl::reorder::primitive_desc(cpu_engine(), c.md(src, from), cpu_engine(),
                                                    c.md(peep, to), primitive_attr(), true),
                      {{DNNL_ARG_FROM, src, from}, {DNNL_ARG_TO, peep, to}})));
      }
  }

  // Activations and states.
  std::vector<ArgDef> args;
  const View x_view = batch_first ? View{{T, N, I}, {I, T * I, 1}, 0} : reshaped({T, N, I});
  args.push_back({DNNL_ARG_SRC_LAYER, c.input(static_cast<size_t>(xi)), x_view});
  const View sv = state_view(D, N, H, batch_first);
  memory::desc src_iter, src_iter_c, dst_iter, dst_iter_c;
  if (const int h0 = c.p.input_index("initial_h"); h0 >= 0) {
    src_iter = c.md(c.input(static_cast<size_t>(h0)), sv);
    args.push_back({DNNL_ARG_SRC_ITER, c.input(static_cast<size_t>(h0)), sv});
  }
  if (const int c0 = c.p.input_index("initial_c"); lstm && c0 >= 0) {
    c.set_f32_only(c.input(static_cast<size_t>(c0)));
    src_iter_c = c.md(c.input(static_cast<size_t>(c0)), sv);
    args.push_back({DNNL_ARG_SRC_ITER_C, c.input(static_cast<size_t>(c0)), sv});
  }
  if (const int yh = c.output_with_role({"y1"}); yh >= 0) {
    dst_iter = c.md(yh, sv);
    args.push_back({DNNL_ARG_DST_ITER, yh, sv});
  }
  if (const int yc = c.output_with_role({"y2"}); lstm && yc >= 0) {
    c.set_f32_only(yc);
    dst_iter_c = c.md(yc, sv);
    args.push_back({DNNL_ARG_DST_ITER_C, yc, sv});
  }
  // oneDNN's LSTM takes its hidden and cell states in pairs: a missing half is a zero state
  // (initial) or a buffer nobody reads (final).
  if (lstm && (!src_iter.is_zero() || !src_iter_c.is_zero()) &&
      (src_iter.is_zero() || src_iter_c.is_zero())) {
    const int z = c.extra({1, D, N, H});
    const View zv = reshaped({1, D, N, H}), flat = reshaped({D * N * H});
    const bool c_missing = src_iter_c.is_zero();
    if (c_missing) c.set_f32_only(z);
    dnnl::eltwise_forward::desc zero(kInference, algorithm::eltwise_linear, c.md(z, flat), 0.f, 0.f);
    c.b.steps.push_back(once(make_step<dnnl::eltwise_forward::primitive_desc>(
        zero, primitive_attr(), {{DNNL_ARG_SRC, z, flat}, {DNNL_ARG_DST, z, flat}})));
    (c_missing ? src_iter_c : src_iter) = c.md(z, zv);
    args.push_back({c_missing ? DNNL_ARG_SRC_ITER_C : DNNL_ARG_SRC_ITER, z, zv});
  }
  if (lstm && (!dst_iter.is_zero() || !dst_iter_c.is_zero()) &&
      (dst_iter.is_zero() || dst_iter_c.is_zero())) {
    const int z = c.extra({1, D, N, H});
    const View zv = reshaped({1, D, N, H});
    const bool c_missing = dst_iter_c.is_zero();
    if (c_missing) c.set_f32_only(z);
    (c_missing ? dst_iter_c : dst_iter) = c.md(z, zv);
    args.push_back({c_missing ? DNNL_ARG_DST_ITER_C : DNNL_ARG_DST_ITER, z, zv});
  }
  // dst_layer: Y itself (one direction), else a [T, N, D·H] buffer (bidirectional, or Y not used).
  const int y = c.output_with_role({"y", "y0"});
  int dst = y;
  View dst_view = batch_first ? View{{T, N, H}, {D * H, T * D * H, 1}, 0} : reshaped({T, N, H});
  if (y < 0 || D == 2) {
    dst = c.extra({T, N, D * H});
    dst_view = reshaped({T, N, D * H});
  }
  args.push_back({DNNL_ARG_DST_LAYER, dst, dst_view});
  args.push_back({DNNL_ARG_WEIGHTS_LAYER, wl, wl_view});
  args.push_back({DNNL_ARG_WEIGHTS_ITER, wr, wr_view});
  const View bias_view = reshaped({1, D, Gb, H});
  args.push_back({DNNL_ARG_BIAS, bias, bias_view});
  if (peep >= 0) args.push_back({DNNL_ARG_WEIGHTS_PEEPHOLE, peep, reshaped({1, D, 3, H})});

  const auto src_layer = c.md(c.input(static_cast<size_t>(xi)), x_view);
  const auto wl_md = c.any({1, D, I, G, H}), wr_md = c.any({1, D, H, G, H});
  const auto bias_md = c.md(bias, bias_view), dst_layer = c.md(dst, dst_view);
  StepDef main;
  if (lstm) {
    c.b.algorithm = "vanilla_lstm";
    if (peep >= 0) {
      dnnl::lstm_forward::desc d(kInference, dir, src_layer, src_iter, src_iter_c, wl_md, wr_md,
                                 c.md(peep, reshaped({1, D, 3, H})), bias_md, dst_layer, dst_iter,
                                 dst_iter_c);
      main = make_step<dnnl::lstm_forward::primitive_desc>(d, c.attr(false), args);
    } else {
      dnnl::lstm_forward::desc d(kInference, dir, src_layer, src_iter, src_iter_c, wl_md, wr_md, bias_md,
                                 dst_layer, dst_iter, dst_iter_c);
      main = make_step<dnnl::lstm_forward::primitive_desc>(d, c.attr(false), args);
    }
  } else if (gru && lbr) {
    c.b.algorithm = "lbr_gru";
    dnnl::lbr_gru_forward::desc d(kInference, dir, src_layer, src_iter, wl_md, wr_md, bias_md, dst_layer,
                                  dst_iter);
    main = make_step<dnnl::lbr_gru_forward::primitive_desc>(d, c.attr(false), args);
  } else if (gru) {
    c.b.algorithm = "vanilla_gru";
    dnnl::gru_forward::desc d(kInference, dir, src_layer, src_iter, wl_md, wr_md, bias_md, dst_layer,
                              dst_iter);
    main = make_step<dnnl::gru_forward::primitive_desc>(d, c.attr(false), args);
  } else {
    c.b.algorithm = "vanilla_rnn";
    dnnl::vanilla_rnn_forward::desc d(kInference, rnn_activation, dir, src_layer, src_iter, wl_md, wr_md,
                                      bias_md, dst_layer, dst_iter);
    main = make_step<dnnl::vanilla_rnn_forward::primitive_desc>(d, c.attr(false), args);
  }
  (void)variant;
  // The RNN primitive is step 0, the one whose implementations are enumerated.
  c.b.steps.insert(c.b.steps.begin(), std::move(main));
  // Bidirectional: oneDNN's [T, N, 2, H] laid out as ONNX's Y [T, 2, N, H] (layout 1: [N, T, 2, H]).
  if (y >= 0 && D == 2) {
    const View from = reshaped({T, N, 2, H});
    const View to = batch_first ? View{{T, N, 2, H}, {2 * H, T * 2 * H, H, 1}, 0}
                                : View{{T, N, 2, H}, {2 * N * H, H, N * H, 1}, 0};
    c.b.steps.push_back(step(dnnl::reorder::primitive_desc(cpu_engine(), c.md(dst, from), cpu_engine(),
                                                           c.md(y, to), primitive_attr(), true),
                             {{DNNL_ARG_FROM, dst, from}, {DNNL_ARG_TO, y, to}}));
  }
}

}  // namespace floorline::kernels::onednn_detail
