// oneDNN kernels: one builder per layer kind maps a Problem onto oneDNN 2.6 primitives (2.x API,
// op descriptors), and one generic Kernel allocates, initialises, runs and verifies them.
//
// Every tensor of a problem has a plain buffer in the ONNX layout (the "tensor"); a primitive sees
// it through a View (dims, strides and offset in elements: a grouped-weights reshape, a transposed
// matrix, a slice). Where the implementation oneDNN chose wants another format (format_tag::any
// for convolution weights, blocked activations), a separate buffer in that format is filled by a
// reorder once, before timing; that reorder is not part of the timed call (weights are packed once
// by any framework; activation conversions are measured as their own cases by the planner).
//
// This file holds the kind table and the public entry points; internal.hpp lists the other files.
#include <omp.h>

#include <algorithm>

#include "floorline/kernels/omp_denormals.hpp"
#include "floorline/kernels/standard_recurrent.hpp"
#include "kernel.hpp"

namespace floorline::kernels {

using namespace onednn_detail;

namespace {

// --- the kind table -------------------------------------------------------------------------------

using Builder = void (*)(Ctx&, const std::string&);
struct KindMapping {
  std::vector<std::string> variants;  // primitive algorithms offered, in order; empty: not mapped
  Builder build = nullptr;
  std::string_view reason;  // not mapped: why; mapped: an optional caveat
  std::string mapping;      // the variants joined, for onednn_support()
};

constexpr std::string_view kCopyProxy = "no oneDNN primitive: timed as a copy of its output";
constexpr std::string_view kNoEltwise = "not mapped: oneDNN 2.6 has no element-wise algorithm for it";
constexpr std::string_view kOwnReason = "not mapped: no oneDNN primitive (the floorline backend runs it)";
constexpr std::string_view kNoBinary = "not mapped: oneDNN 2.6 has no binary algorithm for it";

// The oneDNN kind table: for every kind, the primitive algorithms and builder, or why there are
// none. A switch with no default: a kind added to layer_kind.hpp and left out here does not compile.
KindMapping kind_mapping(LayerKind k) {
  using K = LayerKind;
  // The plain layout, the channel-blocked layout the convolutions write here, and channels-last.
  std::vector<std::string> blocked = {"", "@channels_last"};
  if (const int64_t block = native_channel_block(); block > 0)
    blocked.insert(blocked.begin() + 1, fmt::format("@blocked{}c", block));
  auto with_layouts = [&](const std::string& v) {
    std::vector<std::string> out;
    for (const auto& b : blocked) out.push_back(v + b);
    return out;
  };
  switch (k) {
    case K::kConv:
      // "matmul": a 1x1 convolution (stride 1, no padding) as one GEMM per image on NCHW, no
      // layout conversion (conv.cpp); offered where it applies. "convolution_direct_split": at T > 1
      // threads, T one-thread convolutions side by side, each on a slice of the output (conv.cpp).
      // "convolution_direct@channels_last": a grouped convolution held NHWC (conv.cpp).
      return {{"convolution_direct", "convolution_winograd", "matmul", "convolution_direct_split",
               "convolution_direct@channels_last"},
              conv,
              {},
              {}};
    case K::kConvTranspose:
      return {{"deconvolution_direct"}, conv, {}, {}};
    case K::kGemm:
      return {{"matmul", "inner_product"}, gemm, {}, {}};
    case K::kMatMul:
      // "matmul_flat": a batched MatMul whose right operand is one matrix as one GEMM with the
      // batch folded into the rows (matmul.cpp), as runtimes run attention projections.
      return {{"matmul", "matmul_flat"}, matmul, {}, {}};
    case K::kBatchNormalization:
      return {with_layouts("batch_normalization"), batch_norm, {}, {}};
    case K::kLayerNormalization:
      return {{"layer_normalization"}, layer_norm, {}, {}};
    case K::kInstanceNormalization:
      return {{"batch_normalization"}, instance_norm, {}, {}};
    case K::kLRN:
      return {{"lrn_across_channels"}, lrn, {}, {}};
    case K::kRelu:
    case K::kLeakyRelu:
    case K::kElu:
    case K::kSelu:
    case K::kClip:
    case K::kSigmoid:
    case K::kTanh:
    case K::kHardSigmoid:
    case K::kHardSwish:
    case K::kSoftplus:
    case K::kExp:
    case K::kLog:
    case K::kSqrt:
    case K::kAbs:
    case K::kNeg:
    case K::kReciprocal:
    case K::kPow:
      return {{"eltwise"}, eltwise, {}, {}};
    case K::kErf:
      return {{"eltwise"}, eltwise, "no oneDNN erf: timed as gelu_erf (one erf per element)", {}};
    case K::kGelu:  // eltwise_gelu_erf, or eltwise_gelu_tanh for approximate = "tanh"
      return {{"eltwise"}, eltwise, {}, {}};
    case K::kFloor:
    case K::kCeil:
    case K::kNot:
      return {{}, nullptr, kNoEltwise, {}};
    case K::kAdd:
    case K::kSub:
    case K::kMul:
    case K::kDiv:
    case K::kMax:
    case K::kMin:
      // Also on the convolutions' layouts (eltwise.cpp): a runtime that keeps them runs a
      // squeeze-excitation block's channel-broadcast Mul, or a residual Add, so.
      return {with_layouts("binary"), binary, {}, {}};
    case K::kEqual:
    case K::kLess:
    case K::kGreater:
    case K::kPRelu:
      return {{"binary"}, binary, {}, {}};
    case K::kMod:
    case K::kAnd:
    case K::kOr:
      return {{}, nullptr, kNoBinary, {}};
    case K::kSum:
      return {{"sum"}, sum, {}, {}};
    // --- comparisons, logic and reductions
    case K::kGreaterOrEqual:
    case K::kLessOrEqual:
      return {{"binary"}, binary, {}, {}};
    case K::kXor:
      return {{}, nullptr, kNoBinary, {}};
    case K::kMean:
      return {{"sum"}, sum, "the sum primitive with every scale 1/N", {}};
    // No scan, arg-reduction, top-k, gather-ND, suppression, roi-align, element-scatter or
    // grid-sample primitive in oneDNN 2.6: Floorline's own kernels run them (the floorline backend).
    case K::kCumSum:
    case K::kArgMax:
    case K::kArgMin:
    case K::kTopK:  // detection heads
    case K::kGatherND:
    case K::kNonZero:
    case K::kNonMaxSuppression:
    case K::kRoiAlign:  // sampling and scatter
    case K::kScatterElements:
    case K::kGridSample:
      return {{}, nullptr, kOwnReason, {}};
    case K::kLSTM:
    case K::kGRU:
    case K::kRNN:
      return {{"rnn"}, recurrent, {}, {}};
    // ---
    case K::kSoftmax:
    case K::kLogSoftmax:
      return {{"softmax_v2"}, softmax, {}, {}};
    case K::kMaxPool:
    case K::kAveragePool:
      return {with_layouts("pooling_v2"), pooling, {}, {}};
    case K::kGlobalAveragePool:
    case K::kGlobalMaxPool: {
      // pooling_v2 in each layout (a blocked one reads a blocked convolution's output where it is),
      // then the reduction primitive (plain).
      auto v = with_layouts("pooling_v2");
      v.push_back("reduction");
      return {v, pooling, {}, {}};
    }
    case K::kReduceMean:
    case K::kReduceSum:
    case K::kReduceMax:
    case K::kReduceMin:
    case K::kReduceProd:
      return {{"reduction"}, reduce, {}, {}};
    case K::kConcat:
      return {with_layouts("concat"), concat, {}, {}};
    case K::kTranspose:
      return {{"reorder"}, transpose, {}, {}};
    case K::kSlice:
      return {{"reorder"}, slice, {}, {}};
    case K::kSplit:
      return {{"reorder"}, split, {}, {}};
    case K::kPad:
      return {{"reorder"}, pad, {}, {}};
    case K::kResize:
      return {{"resampling"}, resize, {}, {}};
    case K::kGather:
    case K::kExpand:
    case K::kTile:
    case K::kScatterND:
    case K::kCast:
    case K::kWhere:
      return {{"copy"}, copy_kind, kCopyProxy, {}};
    case K::kRange:
      return {{}, nullptr, "not mapped: Range writes a sequence from scalars, no oneDNN primitive", {}};
    /* quantization */
    case K::kQuantizeLinear:
    case K::kDequantizeLinear:
      return {{"reorder"}, quantize, {}, {}};
    case K::kMatMulNBits:
      return {{}, nullptr, "not mapped: this oneDNN has no matmul with 4-bit block-quantized weights", {}};
    case K::kReshape:
    case K::kFlatten:
    case K::kSqueeze:
    case K::kUnsqueeze:
    case K::kIdentity:
    case K::kDropout:
      return {{}, nullptr, "not mapped: a view moves no data", {}};
    case K::kShape:
    case K::kSize:
    case K::kConstant:
    case K::kConstantOfShape:
      return {{}, nullptr, "not mapped: a host op runs before inference", {}};
    case K::kIf:
    case K::kLoop:
      return {{}, nullptr, "not mapped: control flow (its subgraphs' layers are)", {}};
    case K::kUnsupported:
      return {{}, nullptr, "not mapped: not a kind Floorline knows", {}};
  }
  return {{}, nullptr, {}, {}};  // not a kind: an empty reason, which kind_support_test rejects
}

const KindMapping& mapping_for(LayerKind k) {
  static const std::vector<KindMapping> kTable = [] {
    std::vector<KindMapping> t;
    for (LayerKind kind : kAllLayerKinds) {
      KindMapping m = kind_mapping(kind);
      m.mapping = fmt::format("{}", fmt::join(m.variants, ", "));
      // Beside the RNN primitive: the standard formulation on matmul (recurrent_matmul.cpp).
      if (standard_recurrent_kind(kind)) m.mapping += ", matmul_standard, matmul_standard_batched";
      t.push_back(std::move(m));
    }
    return t;
  }();
  const int i = static_cast<int>(k);
  return kTable.at(static_cast<size_t>(i >= 0 && i < kLayerKindCount ? i : kLayerKindCount - 1));
}

dt data_type(DType t) {
  switch (t) {
    case DType::kF32:
      return dt::f32;
    case DType::kBF16:
      return dt::bf16;
    case DType::kF16:
      return dt::f16;
    case DType::kInt8:  // each tensor's own 8-bit or int32 type is set by the builder (int8.cpp)
      return dt::s8;
  }
  unsupported(fmt::format("the oneDNN backend measures f32 and bf16, not {}", dtype_name(t)));
}

// Builds the primitives of one variant, for `threads` OpenMP threads (a split case's parts). Errors
// coded unsupported (see make_kernel()).
Result<Build> build(const CaseSpec& spec, const std::string& variant, int threads) {
  // An int8 case runs (and verify() checks) its quantization with the defaults written in.
  const Problem p = spec.variant.dtype == DType::kInt8 ? with_quantization(spec.problem) : spec.problem;
  const KindMapping& m = mapping_for(p.kind);
  if (!m.build) return make_error(Disposition::kUnsupported, "{}: {}", p.op, m.reason);
  // int8: the quantized kinds, and Transpose (an 8-bit copy: the int8 bytes calibration)
  if (spec.variant.dtype == DType::kInt8 && !quantization(p) && p.kind != LayerKind::kQuantizeLinear &&
      p.kind != LayerKind::kDequantizeLinear && p.kind != LayerKind::kTranspose)
    return make_error(Disposition::kUnsupported, "{}: no int8 form (not fused from QDQ)", p.op);
  try {
    Ctx c{spec, p, data_type(spec.variant.dtype), {}, threads};
    for (const auto& in : p.inputs) c.b.tensors.push_back({in.shape, Fill::kUniform, false, false});
    for (const auto& out : p.outputs) c.b.tensors.push_back({out.shape, Fill::kNone, false, true});
    // Weights on ±√(3 / fan-in) (problem.hpp, fill_half_width); an int8 case's builder replaces
    // the fill with whole numbers.
    for (size_t k = 0; k < p.inputs.size(); ++k) c.b.tensors[k].scale = fill_half_width(p, k);
    c.b.n_inputs = p.inputs.size();
    c.b.n_outputs = p.outputs.size();
    for (const auto& t : c.b.tensors)
      if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; }))
        unsupported("a shape is unknown");
    m.build(c, variant);
    return std::move(c.b);
  } catch (const KernelError& e) {
    return make_error(e.code, "{}", e.what());
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented) return make_error(Disposition::kUnsupported, "oneDNN: {}", e.what());
    return make_error(Disposition::kUnsupported, "oneDNN rejected the descriptor: {}", e.what());
  } catch (const std::exception& e) {
    return make_error("{}", e.what());
  }
}

// The format the implementation of step `st` holds argument `a`'s tensor in, and the plain view it
// is converted from: for a split case's window (ArgDef::whole), the whole tensor's.
std::pair<memory::desc, View> held_format(const Build& b, const StepDef& st, const ArgDef& a) {
  if (a.whole) return {*a.whole, plain(b.tensors[static_cast<size_t>(a.tensor)].shape)};
  return {st.pd().query_md(dnnl::query::exec_arg_md, a.arg), a.view};
}

// The most implementations of one primitive the plan lists, and a build looks through for its own.
constexpr int kMaxImplementations = 64;

// The thread counts the plan asks oneDNN for its implementations at: every core (two at least),
// then 1, 2, 4 ... below it, the counts of a thread budget up to every core (budget_thread_counts).
// oneDNN's choice depends on the count its primitives are created for, and one plan serves every
// count of a budget; a run at another count (--threads 6 of 16 cores) may be offered one the plan
// does not list, and oneDNN's first choice (the case marked default) is the one at every core. For
// example densenet121's 3x3 convolution 128 -> 32 at
// 56x56, batch 1, is offered jit_fp32_wino_2x3 then jit_wino_4x3 at 2 threads and jit_wino_4x3 alone at 1
// (623 us there, 26% under the next fastest case, on a 2-core Zen 4 EPYC), which a plan made at 2 threads
// alone asked the one-thread run for as its second implementation, and so skipped.
std::vector<int> enumeration_thread_counts() {
  std::vector<int> counts = {std::max(2, omp_get_num_procs())};
  for (int t = 1; t < counts.front(); t *= 2) counts.push_back(t);
  return counts;
}

uint64_t seed_of(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

// --- public interface -----------------------------------------------------------------------------

KindSupport onednn_support(LayerKind kind) {
  const KindMapping& m = mapping_for(kind);
  return m.build ? KindSupport{m.mapping, m.reason} : KindSupport{{}, m.reason};
}

Result<std::unique_ptr<Kernel>> make_onednn_kernel(const CaseSpec& spec) {
  const PlacementScope placement(spec.placement);
  const bool conversion = !spec.feeds.empty();
  const CaseSpec* main_spec = &spec;
  CaseSpec fed;
  if (conversion) {  // a layout conversion: build the case it feeds to learn the formats
    fed = spec;
    fed.variant.algorithm = spec.feeds.algorithm;
    fed.feeds = {};
    main_spec = &fed;
  }
  // "convolution_direct:brg:avx512_core": the variant, then oneDNN's implementation name.
  const auto [variant, impl_name] = split_algorithm(main_spec->variant.algorithm);
  if (!conversion && is_recurrent_matmul(variant)) return make_recurrent_matmul(spec, variant);
  // A conversion's tensor (src or dst of the fed primitive) and the format it converts it to.
  std::optional<LayoutConversion> converted;
  if (conversion) {
    converted = parse_conversion(spec.variant.layout);
    if (!converted) return make_error("{} is not a layout conversion", spec.variant.layout);
  }
  const int converted_arg = converted && converted->tensor == "dst" ? DNNL_ARG_DST : DNNL_ARG_SRC;
  // The format the build's current implementation holds the converted tensor in ("" if none).
  auto held_name = [&](const Build& bb) -> std::string {
    for (const auto& ad : bb.steps[0].args)
      if (ad.arg == converted_arg) return format_name(held_format(bb, bb.steps[0], ad).first);
    return "";
  };
  // Steps the build's first primitive through oneDNN's implementations to the first for which
  // `found` holds; false when there is none.
  auto seek = [](Build& bb, const auto& found) {
    for (int k = 0; !found(); ++k)
      if (k >= kMaxImplementations || !bb.steps[0].next_impl()) return false;
    return true;
  };
  FL_ASSIGN_OR_RETURN(Build b, build(*main_spec, variant, omp_get_max_threads()));
  try {
    bool by_format = false;
    if (b.iterate && !main_spec->impl_name.empty()) {
      // By name: which implementations oneDNN offers, and in what order, depend on the thread count
      // its primitives are created for (enumeration_thread_counts), and the plan serves them all.
      bool found = seek(b, [&] { return b.steps[0].pd().impl_info_str() == main_spec->impl_name; });
      if (!found && conversion) {
        // The implementation it was planned beside is not offered at this count: the same
        // conversion feeds another of the primitive's that holds the tensor in the same format
        // (one conversion case serves every implementation that reads or writes that format).
        auto again = build(*main_spec, variant, omp_get_max_threads());
        if (!again) return again.error();
        b = std::move(again).value();
        found = by_format = seek(b, [&] { return held_name(b) == converted->to; });
      }
      if (!found)
        return make_error(Disposition::kSkipped, "oneDNN offers no {} implementation of {} at {} thread(s)",
                          main_spec->impl_name, variant, omp_get_max_threads());
    } else if (b.iterate) {
      for (int k = 0; k < main_spec->impl_index; ++k)
        if (!b.steps[0].next_impl())
          return make_error(Disposition::kSkipped, "oneDNN now offers only {} implementation(s) of {}", k + 1,
                            variant);
    }
    const std::string impl = b.steps[0].pd().impl_info_str();
    if (!by_format && !main_spec->impl_name.empty() && impl != main_spec->impl_name)
      return make_error(Disposition::kSkipped, "implementation {} of {} is now {}, not {} as planned",
                        main_spec->impl_index, variant, impl, main_spec->impl_name);
    const dt type = data_type(spec.variant.dtype);
    if (conversion) {
      // The tensor converted is src or dst of the fed primitive.
      const std::string tensor = converted->tensor;
      const ArgDef* a = nullptr;
      for (const auto& ad : b.steps[0].args)
        if (ad.arg == converted_arg) a = &ad;
      if (!a) return make_error(Disposition::kUnsupported, "no {} tensor to convert", tensor);
      const auto [want, v] = held_format(b, b.steps[0], *a);
      if (want.get_size() == 0)
        return make_error(Disposition::kUnsupported, "no {} tensor to convert", tensor);
      // The implementation may hold the tensor in another format at this thread count than where
      // the conversion was planned: then it is not this conversion.
      if (const std::string held = format_name(want); held != converted->to)
        return make_error(Disposition::kSkipped,
                          "{} holds {} in {} at {} thread(s), not as the conversion {}", impl, tensor, held,
                          omp_get_max_threads(), spec.variant.layout);
      const memory::desc plain_md(v.d, type, v.strides);
      Build rb;
      rb.algorithm = "reorder";
      rb.iterate = false;
      rb.not_verifiable = "a layout conversion has no ONNX counterpart";
      const Shape shape(v.d.begin(), v.d.end());
      rb.tensors = {{shape, Fill::kUniform, false, false}, {shape, Fill::kNone, false, true}};
      rb.n_inputs = 1;
      rb.n_outputs = 1;
      // The converted side is allocated in the implementation's format by the generic code.
      const bool to_blocked = tensor == "src";
      const memory::desc from = to_blocked ? plain_md : want, to = to_blocked ? want : plain_md;
      dnnl::reorder::primitive_desc rpd(cpu_engine(), from, cpu_engine(), to, primitive_attr(), true);
      if (!rpd) return make_error(Disposition::kUnsupported, "oneDNN has no reorder {}", spec.variant.layout);
      const std::string reorder_impl = rpd.impl_info_str();
      rb.steps.push_back(step(std::move(rpd), {{DNNL_ARG_FROM, 0, View{v.d, v.strides, 0}},
                                               {DNNL_ARG_TO, 1, View{v.d, v.strides, 0}}}));
      auto k =
          std::make_unique<OnednnKernel>(spec.problem, std::move(rb), reorder_impl, type, seed_of(spec.name));
      FL_TRY(k->init());
      return std::unique_ptr<Kernel>(std::move(k));
    }
    const std::string described = impl + b.impl_note;
    auto k = std::make_unique<OnednnKernel>(
        spec.variant.dtype == DType::kInt8 ? with_quantization(spec.problem) : spec.problem, std::move(b),
        described, type, seed_of(spec.name));
    FL_TRY(k->init());
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const KernelError& e) {
    return make_error(e.code, "{}", e.what());
  } catch (const dnnl::error& e) {
    return make_error("oneDNN: {}", e.what());
  } catch (const std::bad_alloc&) {
    return make_error("out of memory allocating the tensors of {}", spec.problem.key);
  }
}

bool is_reference_implementation(const std::string& impl_name, bool rnn_primitive) {
  if (rnn_primitive && impl_name == "ref") return false;  // ref_rnn (its impl_info_str() is "ref")
  return impl_name.rfind("ref", 0) == 0 || impl_name.find("_ref") != std::string::npos;
}

Result<std::vector<Implementation>> onednn_implementations(const CaseSpec& spec) {
  const Problem& p = spec.problem;
  const KindMapping& m = mapping_for(p.kind);
  if (!m.build) return make_error(Disposition::kUnsupported, "{}: {}", p.op, m.reason);
  std::vector<Implementation> out;
  std::optional<Error> first_error;
  // oneDNN's own first choice: convolution_auto's first implementation for Conv, else the first
  // implementation of the first algorithm that has one.
  std::string auto_impl;
  const std::vector<int> counts = enumeration_thread_counts();
  if (p.kind == LayerKind::kConv) {
    const OmpThreadsScope scope(counts.front());
    if (auto ab = build(spec, "convolution_auto", counts.front()); ab.ok())
      auto_impl = ab->steps[0].pd().impl_info_str();
  }
  for (const int threads : counts) {
    const OmpThreadsScope scope(threads);
    for (const auto& variant : m.variants) {
      // A split case is planned at two threads at least (it is unsupported at one).
      if (threads < 2 && variant.ends_with("_split")) continue;
      auto b = build(spec, variant, std::max(2, threads));
      if (!b.ok()) {
        if (!first_error) first_error = b.error();
        continue;
      }
      try {
        auto& st0 = b->steps[0];
        int index = 0;
        do {
          Implementation im;
          im.impl_name = st0.pd().impl_info_str();
          im.algorithm = join_algorithm(variant, im.impl_name);
          im.variant = variant;
          im.impl_index = index++;
          im.reference = is_reference_implementation(im.impl_name, p.kind == LayerKind::kLSTM ||
                                                                       p.kind == LayerKind::kGRU ||
                                                                       p.kind == LayerKind::kRNN);
          if (p.kind == LayerKind::kConv || p.kind == LayerKind::kConvTranspose ||
              p.kind == LayerKind::kGemm || p.kind == LayerKind::kMatMul || !layout_suffix(variant).empty()) {
            std::vector<std::string> parts;
            for (const auto& a : b->steps[0].args) {
              // (A concat's sources are not listed: a conversion case converts one src or dst tensor.)
              const char* name = a.arg == DNNL_ARG_SRC       ? "src"
                                 : a.arg == DNNL_ARG_WEIGHTS ? "wei"
                                 : a.arg == DNNL_ARG_DST     ? "dst"
                                                             : nullptr;
              if (!name) continue;
              const auto [got, v] = held_format(*b, st0, a);
              const memory::desc view(v.d, got.data_type(), v.strides);
              parts.push_back(fmt::format("{}:{}", name, format_name(got)));
              // Weights are packed once by any framework; activations are converted on every call.
              if (a.arg != DNNL_ARG_WEIGHTS && got != view)
                im.conversions.push_back(LayoutConversion{name, format_name(view), format_name(got)});
            }
            im.layout = fmt::format("{}", fmt::join(parts, " "));
          }
          // Offered at an earlier count too: one case (built by name); the conversions it needs at
          // this count are planned beside the earlier count's.
          const auto same = std::find_if(
              out.begin(), out.end(), [&](const Implementation& o) { return o.algorithm == im.algorithm; });
          if (same == out.end()) {
            out.push_back(std::move(im));
          } else {
            for (auto& conv : im.conversions)
              if (std::find(same->conversions.begin(), same->conversions.end(), conv) ==
                  same->conversions.end())
                same->conversions.push_back(std::move(conv));
          }
        } while (b->iterate && index < kMaxImplementations && st0.next_impl());
      } catch (const dnnl::error& e) {
        if (!first_error) first_error = make_error("oneDNN: {}", e.what());
      }
    }
  }
  // Beside the RNN primitive: the standard formulation on matmul primitives (recurrent_matmul.cpp),
  // where it builds; oneDNN's own choice stays the RNN primitive's where it maps the layer.
  std::vector<Implementation> standard;
  if (standard_recurrent_kind(p.kind)) {
    if (auto r = recurrent_matmul_implementations(spec); r.ok())
      standard = std::move(*r);
    else if (!first_error)
      first_error = r.error();
  }
  if (out.empty() && !standard.empty()) {
    standard[0].is_default = true;
    return standard;
  }
  if (out.empty())
    return first_error ? *first_error : make_error(Disposition::kUnsupported, "no implementation");
  bool marked = false;
  for (auto& im : out)
    if (!auto_impl.empty() && im.impl_name == auto_impl && !marked) marked = im.is_default = true;
  if (!marked) out[0].is_default = true;
  out.insert(out.end(), standard.begin(), standard.end());
  return out;
}

benchmark::internal::Benchmark* register_onednn_case(const CaseSpec& spec, const Work& work) {
  return register_case(spec, work, make_onednn_kernel);
}

std::string onednn_version() {
  const auto* v = dnnl::version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

std::string onednn_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

void set_onednn_threads(int threads) {
  omp_set_num_threads(std::max(1, threads));
}
int onednn_threads() {
  return omp_get_max_threads();
}
void flush_onednn_denormals(bool flush, int threads) {
  omp_flush_denormals(flush, threads);
}
void on_onednn_threads(int threads, const std::function<void(int, int)>& work) {
  omp_team(threads, work);
}

}  // namespace floorline::kernels
