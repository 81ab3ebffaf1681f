// CUDA builder on cuDNN's RNN API (v8/v9: cudnnSetRNNDescriptor_v8, cudnnRNNForward): LSTM, GRU
// with linear_before_reset = 1 (cuDNN's GRU is that form), vanilla RNN with Tanh or Relu.
//
// cuDNN keeps every weight and bias in one weight space; the ONNX W, R and B operands are copied
// into it gate by gate (cudnnGetRNNWeightParams gives each matrix's address) before timing, as a
// framework does once when it loads the model. cuDNN's gate order: LSTM i, f, g(c), o (ONNX i, o,
// f, c); GRU r, z, h (ONNX z, r, h). Bias mode CUDNN_RNN_DOUBLE_BIAS: ONNX Wb and Rb as they are.
// Data: X as a sequence-major packed RNN data tensor [T, N, I] (layout 0); Y [T, N, D·H] (a
// bidirectional layer's two halves side by side), transformed into ONNX's [T, D, N, H] with
// cudnnTransformTensor inside the timed call when D = 2. sequence_lens is not read: every sequence
// runs T steps (as the oneDNN backend times it).
// Not mapped: direction reverse (cuDNN runs one direction forward only), GRU with
// linear_before_reset = 0, layout 1, peepholes, clip, input_forget, other activations.
#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {
namespace {

using RnnDesc = Desc<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDesc =
    Desc<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;

}  // namespace

void rnn(Ctx& c) {
  const LayerKind kind = c.p.kind;
  const bool lstm = kind == LayerKind::kLSTM, gru = kind == LayerKind::kGRU;
  const int xi = c.p.input_index("x"), wi = c.p.input_index("w"), ri = c.p.input_index("r");
  if (xi < 0 || wi < 0 || ri < 0) fail(Disposition::kUnsupported, c.p.op + " needs X, W and R");
  const Shape &xs = c.in_shape(static_cast<size_t>(xi)), &rs = c.in_shape(static_cast<size_t>(ri));
  if (xs.size() != 3 || rs.size() != 3) fail(Disposition::kUnsupported, "X and R must be 3-D");
  if (c.p.int_attr("layout") != 0) fail(Disposition::kUnsupported, "layout 1 (batch first) is not mapped");
  const std::string direction = c.p.string_attr("direction");
  if (direction == "reverse") fail(Disposition::kUnsupported, "cuDNN runs one direction forward only");
  if (c.p.floats.count("clip")) fail(Disposition::kUnsupported, "a cell clip (cuDNN has none)");
  if (lstm && (c.p.int_attr("input_forget") != 0 || c.p.input_index("p") >= 0))
    fail(Disposition::kUnsupported, "input_forget and peepholes are not mapped");
  if (gru && c.p.int_attr("linear_before_reset") == 0)
    fail(Disposition::kUnsupported,
         "cuDNN's GRU applies the reset gate after the recurrent GEMM "
         "(ONNX linear_before_reset = 1 only)");
  const std::string acts = c.p.string_attr("activations", "");
  cudnnRNNMode_t mode = lstm ? CUDNN_LSTM : gru ? CUDNN_GRU : CUDNN_RNN_TANH;
  if (!acts.empty()) {
    if (kind == LayerKind::kRNN && (acts == "Relu" || acts == "Relu,Relu"))
      mode = CUDNN_RNN_RELU;
    else
      fail(Disposition::kUnsupported,
           "activations " + acts + " (cuDNN runs the ONNX defaults, RNN also Relu)");
  }
  const int T = static_cast<int>(xs[0]), N = static_cast<int>(xs[1]), I = static_cast<int>(xs[2]);
  const int D = static_cast<int>(rs[0]), H = static_cast<int>(rs[2]);
  const int G = lstm ? 4 : gru ? 3 : 1;

  auto& rnn_desc = c.desc<RnnDesc>();
  const cudnnDataType_t type = cudnn_type(c.type);
  const cudnnMathType_t math = c.tensor_ops() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  check(
      cudnnSetRNNDescriptor_v8(rnn_desc, CUDNN_RNN_ALGO_STANDARD, mode, CUDNN_RNN_DOUBLE_BIAS,
                               D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, type,
                               CUDNN_DATA_FLOAT, math, I, H, H, 1, nullptr, CUDNN_RNN_PADDED_IO_DISABLED),
      "cudnnSetRNNDescriptor_v8");
  std::vector<int> lengths(static_cast<size_t>(N), T);
  auto& x_desc = c.desc<RnnDataDesc>();
  auto& y_desc = c.desc<RnnDataDesc>();
  check(cudnnSetRNNDataDescriptor(x_desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, N, I,
                                  lengths.data(), nullptr),
        "cudnnSetRNNDataDescriptor");
  check(cudnnSetRNNDataDescriptor(y_desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, N, D * H,
                                  lengths.data(), nullptr),
        "cudnnSetRNNDataDescriptor");
  auto& h_desc = c.desc<TensorDesc>();
  set_strided(h_desc, c.type, {D, N, H}, {N * H, H, 1});

  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  check(cudnnGetRNNWeightSpaceSize(c.dev.cudnn, rnn_desc, &weight_bytes), "cudnnGetRNNWeightSpaceSize");
  check(cudnnGetRNNTempSpaceSizes(c.dev.cudnn, rnn_desc, CUDNN_FWD_MODE_INFERENCE, x_desc, &work_bytes,
                                  &reserve_bytes),
        "cudnnGetRNNTempSpaceSizes");
  check_workspace(static_cast<int64_t>(work_bytes));
  void* weights = c.scratch(weight_bytes);
  void* work = c.scratch(work_bytes);
  void* reserve = c.scratch(reserve_bytes);
  int* dev_lengths = static_cast<int*>(c.scratch(lengths.size() * sizeof(int)));
  check(cudaMemcpy(dev_lengths, lengths.data(), lengths.size() * sizeof(int), cudaMemcpyHostToDevice),
        "cudaMemcpy sequence lengths");
  c.b.workspace = static_cast<int64_t>(work_bytes);

  // ONNX W [D, G, H, I], R [D, G, H, H], B [D, 2, G, H] into the weight space: cuDNN linear layer
  // id L (0..G-1 over the input, G..2G-1 over the recurrent state) is ONNX gate onnx_gate[L mod G].
  const std::vector<int> onnx_gate = lstm  ? std::vector<int>{0, 2, 3, 1}
                                     : gru ? std::vector<int>{1, 0, 2}
                                           : std::vector<int>{0};
  const size_t esize = static_cast<size_t>(device::size_of(c.type));
  const int bi = c.p.input_index("b");
  c.b.tensors[static_cast<size_t>(wi)].fill = Fill::kSmall;
  c.b.tensors[static_cast<size_t>(ri)].fill = Fill::kSmall;
  void* wp = c.ptr(c.input(static_cast<size_t>(wi)));
  void* rp = c.ptr(c.input(static_cast<size_t>(ri)));
  void* bp = bi >= 0 ? c.ptr(c.input(static_cast<size_t>(bi))) : nullptr;
  struct Copy {
    void* to;
    const void* from;
    size_t bytes;
  };
  std::vector<Copy> copies;
  std::vector<void*> zero_bias;
  auto& m_desc = c.desc<TensorDesc>();
  auto& b_desc = c.desc<TensorDesc>();
  for (int d = 0; d < D; ++d)
    for (int lin = 0; lin < 2 * G; ++lin) {
      void *m_addr = nullptr, *b_addr = nullptr;
      check(cudnnGetRNNWeightParams(c.dev.cudnn, rnn_desc, d, weight_bytes, weights, lin, m_desc, &m_addr,
                                    b_desc, &b_addr),
            "cudnnGetRNNWeightParams");
      const bool recurrent = lin >= G;
      const int g = onnx_gate[static_cast<size_t>(lin % G)];
      const int in = recurrent ? H : I;
      const char* src = static_cast<const char*>(recurrent ? rp : wp);
      copies.push_back({m_addr, src + (static_cast<size_t>(d * G + g) * H * in) * esize,
                        static_cast<size_t>(H) * in * esize});
      if (bp)
        copies.push_back({b_addr,
                          static_cast<const char*>(bp) +
                              (static_cast<size_t>(d * 2 * G + (recurrent ? G : 0) + g) * H) * esize,
                          static_cast<size_t>(H) * esize});
      else
        zero_bias.push_back(b_addr);
    }
  c.b.prefills.push_back([copies, zero_bias, H, esize](Context& dev) {
    for (const auto& cp : copies)
      check(cudaMemcpyAsync(cp.to, cp.from, cp.bytes, cudaMemcpyDeviceToDevice, dev.stream),
            "cudaMemcpyAsync");
    for (void* z : zero_bias)
      check(cudaMemsetAsync(z, 0, static_cast<size_t>(H) * esize, dev.stream), "cudaMemsetAsync");
  });

  void* xp = c.ptr(c.input(static_cast<size_t>(xi)));
  const int h0 = c.p.input_index("initial_h"), c0 = c.p.input_index("initial_c");
  void* hx = h0 >= 0 ? c.ptr(c.input(static_cast<size_t>(h0))) : nullptr;
  void* cx = lstm && c0 >= 0 ? c.ptr(c.input(static_cast<size_t>(c0))) : nullptr;
  const int y = c.output_with_role({"y", "y0"}), yh = c.output_with_role({"y1"}),
            yc = c.output_with_role({"y2"});
  void* hy = yh >= 0 ? c.ptr(yh) : nullptr;
  void* cy = lstm && yc >= 0 ? c.ptr(yc) : nullptr;
  // Y itself for one direction; cuDNN's [T, N, 2H] buffer for two (then laid out as ONNX's).
  const int y_buf = y >= 0 && D == 1 ? y : c.extra({T, N, D * H});
  void* yp = c.ptr(y_buf);
  void* y_onnx = y >= 0 && D == 2 ? c.ptr(y) : nullptr;
  auto& t_from = c.desc<TensorDesc>();
  auto& t_to = c.desc<TensorDesc>();
  if (y_onnx) {
    set_strided(t_from, c.type, {T, N, 2, H}, {N * 2 * H, 2 * H, H, 1});
    set_strided(t_to, c.type, {T, N, 2, H}, {2 * N * H, H, N * H, 1});
  }
  c.b.implementation =
      fmt::format("cudnnRNNForward {} CUDNN_RNN_ALGO_STANDARD", lstm                     ? "CUDNN_LSTM"
                                                                : gru                    ? "CUDNN_GRU"
                                                                : mode == CUDNN_RNN_RELU ? "CUDNN_RNN_RELU"
                                                                                         : "CUDNN_RNN_TANH");
  c.b.steps.push_back([=, &rnn_desc, &x_desc, &y_desc, &h_desc, &t_from, &t_to](Context& d) {
    check_run(cudnnRNNForward(d.cudnn, rnn_desc, CUDNN_FWD_MODE_INFERENCE, dev_lengths, x_desc, xp, y_desc,
                              yp, h_desc, hx, hy, h_desc, cx, cy, weight_bytes, weights, work_bytes, work,
                              reserve_bytes, reserve),
              "cudnnRNNForward");
    if (y_onnx)
      check_run(cudnnTransformTensor(d.cudnn, &kOne, t_from, yp, &kZero, t_to, y_onnx),
                "cudnnTransformTensor");
  });
}

}  // namespace floorline::kernels::cuda_detail
