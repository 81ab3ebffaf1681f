// The floorline kind table and the public entry points of the floorline kernel library.
#include <omp.h>

#include <algorithm>

#include "floorline/kernels/omp_denormals.hpp"
#include "internal.hpp"

namespace floorline::kernels {

using namespace floorline_detail;

namespace {

enum class Family {
  kNone,
  kDetection,
  kData,
  kChannels,
  kPool,
  kSampling,
  kGemm,
  kNBits,
  kConv,
  kPad,
  kSilu
};

struct KindMapping {
  std::string_view kernel;  // the kernel's name, the cases' algorithm; empty: not mapped
  Family family = Family::kNone;
  std::string_view reason;  // not mapped: why; mapped: an optional caveat
};

constexpr std::string_view kVendor = "not mapped: a vendor library runs it (no kernel of Floorline's own)";

// The floorline kind table. A switch with no default: a kind added to layer_kind.hpp and left out
// here does not compile.
KindMapping kind_mapping(LayerKind k) {
  using K = LayerKind;
  switch (k) {
    // No CPU vendor library in the tree has these.
    case K::kCumSum:
      return {"cumsum", Family::kDetection, {}};
    case K::kArgMax:
    case K::kArgMin:
      return {"arg_reduce", Family::kDetection, {}};
    case K::kTopK:
      return {"topk", Family::kDetection, {}};
    case K::kGatherND:
      return {"gather_nd", Family::kDetection, {}};
    case K::kNonZero:
      return {"nonzero", Family::kDetection, "fed exactly the --max-detections count"};
    case K::kNonMaxSuppression:
      return {"nms", Family::kDetection, "fed exactly the --max-detections count"};
    case K::kRoiAlign:
      return {"roi_align", Family::kSampling, {}};
    case K::kScatterElements:
      return {"scatter_elements", Family::kSampling, {}};
    case K::kGridSample:
      return {"grid_sample", Family::kSampling, {}};
    // Beside the vendor libraries: a plain formulation a runtime's own kernel uses.
    case K::kConcat:
      return {"concat", Family::kData, {}};
    case K::kSoftmax:
      return {"softmax", Family::kData, {}};
    case K::kLogSoftmax:
      return {"log_softmax", Family::kData, {}};
    case K::kResize:
      return {"copy", Family::kData, "the identity Resize only (output shape equal to the input's)"};
    case K::kAdd:
    case K::kSub:
    case K::kMul:
    case K::kDiv:
      return {"binary", Family::kData,
              "with numpy broadcasting, rows of contiguous elements; and on oneDNN's blocked layouts, of a "
              "4-D tensor and another or a per-channel operand (blocked.cpp)"};
    case K::kReduceMean:
    case K::kReduceSum:
    case K::kReduceMax:
    case K::kReduceMin:
      return {"reduce", Family::kData, "over one run of adjacent axes (outer × reduced × inner)"};
    case K::kExpand:
      return {"expand", Family::kData, "a broadcast copy: rows of contiguous elements"};
    case K::kSlice:
      return {
          "slice", Family::kChannels,
          "a run of channels of a 4-D tensor (step 1), plain and on oneDNN's blocked layouts (channels.cpp); "
          "else, with positive steps, copy_runs where the output is runs of 16 or more contiguous elements "
          "(data.cpp)"};
    case K::kSplit:
      return {"split", Family::kChannels,
              "along the channels of a 4-D tensor, plain and on oneDNN's blocked layouts (channels.cpp)"};
    case K::kTranspose:
      return {"channel_shuffle", Family::kChannels,
              "the channel shuffle ([N, G, K, H, W] by perm 0,2,1,3,4), plain and on oneDNN's blocked "
              "layouts (channels.cpp); else copy_runs where the last axes stay in place, runs of 16 or "
              "more contiguous elements (data.cpp); and NCHW <-> NHWC with the NCHW side held channels-last, "
              "a copy (transpose@nhwc, relabel.cpp)"};
    case K::kGlobalAveragePool:
      return {
          "global_average_pool", Family::kPool,
          "plain, and on oneDNN's blocked layouts aBcd8b and aBcd16b, its output blocked too (blocked.cpp)"};
    case K::kTile:
      return {"tile", Family::kData, "repeated rows of contiguous elements"};
    case K::kSigmoid:
      return {"silu", Family::kSilu,
              "with its Mul by its own input fused (SiLU, post-op MulInput), one pass (silu.cpp); a Sigmoid "
              "alone is a vendor library's"};
    case K::kPad:
      return {"pad", Family::kPad,
              "mode constant (0), non-negative pads: plain, and of H and W on oneDNN's blocked layouts and "
              "channels-last (pad.cpp)"};
    case K::kMatMulNBits:
      return {"matmul_nbits", Family::kNBits,
              "4-bit weights with packed zero points, dequantized in cache-sized tiles; AVX2 and FMA "
              "(nbits.cpp)"};
    case K::kGemm:
    case K::kMatMul:
      return {"sgemm_packed", Family::kGemm,
              "B (2-D, a constant) packed once, as a runtime packs weights; AVX2 and FMA (gemm.cpp); and "
              "a MatMul with attention's chain fused (scale, biases, softmax, the product by V): attention "
              "(attention.cpp)"};
    case K::kConv:
      return {
          "winograd_f4x4_3x3", Family::kConv,
          "3x3, unit strides and dilations, one group, 2-D: Winograd F(4x4, 3x3) and F(2x2, 3x3), a Relu, a "
          "residual Add or both fused (winograd.cpp); and conv_valid_taps where the taps read padding for "
          "many "
          "outputs, dilated convolutions (taps.cpp); AVX2 and FMA"};
    case K::kConvTranspose:
    case K::kBatchNormalization:
    case K::kLayerNormalization:
    case K::kInstanceNormalization:
    case K::kLRN:
    case K::kRelu:
    case K::kLeakyRelu:
    case K::kPRelu:
    case K::kElu:
    case K::kSelu:
    case K::kClip:
    case K::kTanh:
    case K::kHardSigmoid:
    case K::kHardSwish:
    case K::kSoftplus:
    case K::kErf:
    case K::kExp:
    case K::kLog:
    case K::kSqrt:
    case K::kReciprocal:
    case K::kNeg:
    case K::kAbs:
    case K::kFloor:
    case K::kCeil:
    case K::kNot:
    case K::kCast:
    case K::kGelu:
    case K::kPow:
    case K::kMax:
    case K::kMin:
    case K::kMod:
    case K::kEqual:
    case K::kLess:
    case K::kGreater:
    case K::kAnd:
    case K::kOr:
    case K::kWhere:
    case K::kSum:
    case K::kGreaterOrEqual:
    case K::kLessOrEqual:
    case K::kXor:
    case K::kMean:
    case K::kMaxPool:
    case K::kAveragePool:
    case K::kGlobalMaxPool:
    case K::kReduceProd:
    case K::kLSTM:
    case K::kGRU:
    case K::kRNN:
    case K::kGather:
    case K::kScatterND:
    case K::kRange:
    case K::kQuantizeLinear:
    case K::kDequantizeLinear:
      return {{}, Family::kNone, kVendor};
    case K::kReshape:
    case K::kFlatten:
    case K::kSqueeze:
    case K::kUnsqueeze:
    case K::kIdentity:
    case K::kDropout:
      return {{}, Family::kNone, "not mapped: a view moves no data"};
    case K::kShape:
    case K::kSize:
    case K::kConstant:
    case K::kConstantOfShape:
      return {{}, Family::kNone, "not mapped: a host op runs before inference"};
    case K::kIf:
    case K::kLoop:
      return {{}, Family::kNone, "not mapped: control flow (its subgraphs' layers are)"};
    case K::kUnsupported:
      return {{}, Family::kNone, "not mapped: not a kind Floorline knows"};
  }
  return {{}, Family::kNone, {}};  // not a kind: an empty reason, which kind_support_test rejects
}

uint64_t seed_of(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

KindSupport floorline_support(LayerKind kind) {
  const KindMapping m = kind_mapping(kind);
  return {m.kernel, m.reason};
}

std::string floorline_kernel_name(const Problem& p) {
  const KindMapping m = kind_mapping(p.kind);
  // Resize: only the identity (every scale 1: ssdlite's 320×320 input resize) is a copy.
  if (p.kind == LayerKind::kResize &&
      (p.inputs.empty() || p.outputs.empty() || p.inputs[0].shape != p.outputs[0].shape))
    return "";
  // Slice, Split, Transpose: where they move whole channels of 4-D tensors; else a Transpose or
  // Slice whose output is runs of contiguous elements of its input, copied (copy_runs, data.cpp).
  // (A Transpose that moves the last axis is not ours: TiledTranspose, element by element in tiles,
  // took 1.5-2.9x oneDNN's reorder on ConvNeXt's NCHW <-> NHWC transposes at batch 32.)
  if (m.family == Family::kChannels && !channel_move(p))
    return (p.kind == LayerKind::kTranspose || p.kind == LayerKind::kSlice) && copy_runs(p) ? "copy_runs"
                                                                                            : "";
  // A Sigmoid: only with its Mul by its input fused (silu.cpp).
  if (m.family == Family::kSilu && !silu_problem(p)) return "";
  // A MatMul whose post-ops are attention's chain: the fused attention kernel (attention.cpp).
  if (is_attention_problem(p)) return "attention";
  return std::string(m.kernel);
}

namespace {

// make_floorline_kernel, or with `check_only` its checks alone where the problem decides them
// (sgemm_packed: no buffers, no packing; a null kernel): check_floorline_case.
Result<std::unique_ptr<Kernel>> make_kernel(const CaseSpec& spec, bool check_only) {
  const PlacementScope placement(spec.placement);
  const Problem& p = spec.problem;
  const KindMapping m = kind_mapping(p.kind);
  const std::string name = floorline_kernel_name(p);
  // A Transpose between NCHW and NHWC with its NCHW side held channels-last: a copy (relabel.cpp).
  if (spec.variant.algorithm == "transpose@nhwc")
    return own_kernel_or_error(spec, spec.variant.algorithm, [&]() -> std::unique_ptr<Kernel> {
      return make_relabel_kernel(p, seed_of(spec.name), check_only);
    });
  if (name.empty())
    return make_error(
        Disposition::kUnsupported, "{}: {}", p.op,
        m.kernel.empty() ? m.reason : std::string_view("no kernel of Floorline's for this layer"));
  // A Concat also runs on a blocked layout: "concat@blocked16c", "concat@blocked8c".
  int block = 0;
  if (name == "concat" && spec.variant.algorithm == "concat@blocked16c") block = 16;
  if (name == "concat" && spec.variant.algorithm == "concat@blocked8c") block = 8;
  // GlobalAveragePool, the binaries and the channel movements too: "global_average_pool@blocked8c",
  // "binary@blocked16c", "channel_shuffle@blocked8c"...
  for (const char* blocked : {"global_average_pool", "binary", "slice", "split", "channel_shuffle", "pad"})
    for (const int b : {16, 8})
      if (name == blocked && spec.variant.algorithm == fmt::format("{}@blocked{}c", blocked, b)) block = b;
  // The channel movements, GlobalAveragePool and the binaries on the channels-last layout:
  // "slice@nhwc", "concat@nhwc", "binary@nhwc"...
  for (const char* moved :
       {"slice", "split", "channel_shuffle", "concat", "global_average_pool", "binary", "pad"})
    if (name == moved && spec.variant.algorithm == fmt::format("{}@nhwc", moved)) block = kNhwc;
  const bool f32_weights = name == "matmul_nbits" && spec.variant.algorithm == "matmul_nbits@f32_weights";
  // A Conv runs F(4x4, 3x3), or F(2x2, 3x3) or its valid taps where the case asks for it.
  const bool valid_taps = m.family == Family::kConv && spec.variant.algorithm == "conv_valid_taps";
  const int winograd_m = m.family != Family::kConv || valid_taps         ? 0
                         : spec.variant.algorithm == "winograd_f2x2_3x3" ? 2
                                                                         : 4;
  if (!spec.variant.algorithm.empty() && spec.variant.algorithm != name && block == 0 && !f32_weights &&
      winograd_m != 2 && !valid_taps)
    return make_error(Disposition::kUnsupported, "no floorline kernel {} for {} (it runs {})",
                      spec.variant.algorithm, p.op, name);
  const uint64_t seed = seed_of(spec.name);
  if (name == "silu")
    return own_kernel_or_error(
        spec, name, [&]() -> std::unique_ptr<Kernel> { return make_silu_kernel(p, seed, check_only); }, true);
  if (name == "attention")
    return own_kernel_or_error(
        spec, name,
        [&]() -> std::unique_ptr<Kernel> {
          if (check_only) {
            attention_desc(p);
            return nullptr;
          }
          return make_attention_kernel(p, seed);
        },
        true);
  return own_kernel_or_error(
      spec, name,
      [&]() -> std::unique_ptr<Kernel> {
        switch (m.family) {
          case Family::kDetection:
            return make_detection_kernel(p, name, seed);
          case Family::kData:
            if (name == "binary" && block != 0) return make_blocked_binary_kernel(p, seed, block);
            if (name == "concat" && block == kNhwc) return make_channel_kernel(p, name, seed, block);
            // A blocked Concat whose inputs are not all a multiple of the block: lanes move.
            if (name == "concat" && block > 0 &&
                std::any_of(p.inputs.begin(), p.inputs.end(), [&](const Operand& in) {
                  return in.shape.size() == 4 && in.shape[1] % block != 0;
                }))
              return make_channel_kernel(p, name, seed, block);
            return make_data_kernel(p, name, seed, block);
          case Family::kChannels:
            if (name == "copy_runs") {
              // floorline_kernel_name has planned the runs (copy_runs): no buffers to check it.
              if (check_only) return nullptr;
              return make_data_kernel(p, name, seed, 0);
            }
            return make_channel_kernel(p, name, seed, block);
          case Family::kPool:
            return make_pool_kernel(p, seed, block);
          case Family::kPad:
            return make_pad_kernel(p, seed, block, check_only);
          case Family::kSilu:
            break;  // above
          case Family::kSampling:
            return make_sampling_kernel(p, name, seed);
          case Family::kGemm:
            if (check_only) {
              packed_gemm_desc(p);
              return nullptr;
            }
            return make_gemm_kernel(p, seed);
          case Family::kNBits:
            if (check_only) {
              nbits_desc(p);
              return nullptr;
            }
            return make_nbits_kernel(p, seed, f32_weights);
          case Family::kConv:
            if (valid_taps) {
              if (check_only) {
                valid_taps_desc(p);
                return nullptr;
              }
              return make_valid_taps_kernel(p, seed);
            }
            if (check_only) {
              winograd_desc(p);
              return nullptr;
            }
            return make_winograd_kernel(p, seed, winograd_m);
          case Family::kNone:
            break;
        }
        unsupported(fmt::format("no floorline kernel for {}", p.op));
      },
      m.family == Family::kConv);
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_floorline_kernel(const CaseSpec& spec) {
  return make_kernel(spec, false);
}

Status check_floorline_case(const CaseSpec& spec) {
  auto k = make_kernel(spec, true);
  return k.ok() ? Status{} : Status(k.error());
}

benchmark::internal::Benchmark* register_floorline_case(const CaseSpec& spec, const Work& work) {
  return register_case(spec, work, make_floorline_kernel);
}

std::string floorline_version() {
  return "1";
}

void set_floorline_threads(int threads) {
  omp_set_num_threads(std::max(1, threads));
}
int floorline_threads() {
  return omp_get_max_threads();
}
void flush_floorline_denormals(bool flush, int threads) {
  omp_flush_denormals(flush, threads);
}
void on_floorline_threads(int threads, const std::function<void(int, int)>& work) {
  omp_team(threads, work);
}

namespace floorline_detail {

Result<std::unique_ptr<Kernel>> own_kernel_or_error(const CaseSpec& spec, const std::string& name,
                                                    const std::function<std::unique_ptr<Kernel>()>& build,
                                                    bool fuses_epilogue) {
  if (spec.variant.dtype != DType::kF32)
    return make_error(Disposition::kUnsupported, "floorline {} runs f32, not {}", name,
                      dtype_name(spec.variant.dtype));
  if (!spec.problem.post_ops.empty() && !fuses_epilogue)
    return make_error(Disposition::kUnsupported, "floorline {} fuses no epilogue", name);
  try {
    return build();
  } catch (const KernelError& e) {
    return make_error(e.code, "{}", e.what());
  } catch (const MissingAttribute& e) {
    return make_error("{}", e.what());
  } catch (const std::bad_alloc&) {
    return make_error(Disposition::kSkipped, "out of memory allocating the tensors of {}", spec.problem.key);
  }
}

}  // namespace floorline_detail
}  // namespace floorline::kernels
