// The per-element comparison of a kernel's output with the reference (reference.hpp says the rule).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "floorline/kernels/reference.hpp"

namespace floorline::kernels {

namespace {

constexpr double kF32Roundoff = 0x1p-24;

// ulps of the accumulator per class, and the margin on √K (reference.hpp).
constexpr double kRoundedUlps = 4, kTranscendentalUlps = 16, kAccumulatingUlps = 16, kSqrtKMargin = 8;
// An interpolation's sample position, rounded in f32, times the data's slope per pixel.
constexpr double kPositionUlps = 4;
// The products' inputs rounded by the math mode (tf32), and an f16/bf16 output's own rounding.
constexpr double kInputRoundings = 8, kOutputRoundings = 4;
// Winograd and FFT transforms amplify the rounding error.
constexpr double kFastAlgorithmFactor = 64;

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) n *= s[i];
  return n;
}

const Shape& input_shape(const Problem& p, size_t k) {
  static const Shape kNone;
  return k < p.inputs.size() ? p.inputs[k].shape : kNone;
}

// The unit roundoff with which the math mode rounds the inputs of a product (0: none, the reference
// reads the stored, already rounded, values).
double input_roundoff(MathMode m) {
  switch (m) {
    case MathMode::kTf32:
      return 0x1p-11;
    case MathMode::kFp32:
    case MathMode::kF16:
    case MathMode::kBF16:
    case MathMode::kInt8:
      return 0;
  }
  return 0;
}

// The unit roundoff of an output stored in `t` beyond f32's (0 for f32: the reference rounds to f32).
double output_roundoff(DType t) {
  switch (t) {
    case DType::kF16:
      return 0x1p-11;
    case DType::kBF16:
      return 0x1p-8;
    case DType::kF32:
    case DType::kInt8:
      return 0;
  }
  return 0;
}

struct Fault {
  int64_t index;
  double scale;
};
thread_local std::optional<Fault> g_fault;
thread_local double g_last_worst_ratio = 0;

std::string multi_index(int64_t flat, const Shape& shape) {
  Shape idx(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= 0) continue;
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ","));
}

}  // namespace

AccuracyClass accuracy_class(LayerKind kind) {
  using K = LayerKind;
  using A = AccuracyClass;
  switch (kind) {
    case K::kConv:
    case K::kConvTranspose:
    case K::kGemm:
    case K::kMatMul:
    case K::kMatMulNBits:
    case K::kLayerNormalization:
    case K::kInstanceNormalization:
    case K::kLRN:
    case K::kSoftmax:
    case K::kLogSoftmax:
    case K::kAveragePool:
    case K::kGlobalAveragePool:
    case K::kReduceMean:
    case K::kReduceSum:
    case K::kReduceProd:
    case K::kCumSum:
    case K::kLSTM:
    case K::kGRU:
    case K::kRNN:
    case K::kMean:
    case K::kSum:
      return A::kAccumulating;
    case K::kResize:
    case K::kGridSample:
    case K::kRoiAlign:
      return A::kInterpolating;
    case K::kElu:
    case K::kSelu:
    case K::kSigmoid:
    case K::kTanh:
    case K::kSoftplus:
    case K::kErf:
    case K::kGelu:
    case K::kExp:
    case K::kLog:
    case K::kPow:
      return A::kTranscendental;
    case K::kBatchNormalization:
    case K::kLeakyRelu:
    case K::kPRelu:
    case K::kHardSigmoid:
    case K::kHardSwish:
    case K::kSqrt:
    case K::kReciprocal:
    case K::kAdd:
    case K::kSub:
    case K::kMul:
    case K::kDiv:
    case K::kRange:
    case K::kDequantizeLinear:
    case K::kQuantizeLinear:
      return A::kRounded;
    case K::kRelu:
    case K::kClip:
    case K::kNeg:
    case K::kAbs:
    case K::kFloor:
    case K::kCeil:
    case K::kNot:
    case K::kCast:
    case K::kMax:
    case K::kMin:
    case K::kMod:
    case K::kEqual:
    case K::kLess:
    case K::kGreater:
    case K::kAnd:
    case K::kOr:
    case K::kWhere:
    case K::kGreaterOrEqual:
    case K::kLessOrEqual:
    case K::kXor:
    case K::kArgMax:
    case K::kArgMin:
    case K::kTopK:
    case K::kGatherND:
    case K::kNonZero:
    case K::kNonMaxSuppression:
    case K::kScatterElements:
    case K::kMaxPool:
    case K::kGlobalMaxPool:
    case K::kReduceMax:
    case K::kReduceMin:
    case K::kConcat:
    case K::kSplit:
    case K::kSlice:
    case K::kTranspose:
    case K::kPad:
    case K::kGather:
    case K::kExpand:
    case K::kTile:
    case K::kScatterND:
    case K::kReshape:
    case K::kFlatten:
    case K::kSqueeze:
    case K::kUnsqueeze:
    case K::kIdentity:
    case K::kDropout:
    case K::kShape:
    case K::kSize:
    case K::kConstant:
    case K::kConstantOfShape:
    case K::kIf:
    case K::kLoop:
    case K::kUnsupported:
      return A::kExact;
  }
  return A::kExact;
}

int64_t accumulation_length(const Problem& p) {
  using K = LayerKind;
  const Shape& x = input_shape(p, 0);
  const auto rank = x.size();
  int64_t n = 1;
  switch (p.kind) {
    case K::kConv: {  // w: (O, C/group, k...)
      const Shape& w = input_shape(p, 1);
      n = product(w, 1, w.size());
      break;
    }
    case K::kConvTranspose: {  // w: (C, O/group, k...)
      const Shape& w = input_shape(p, 1);
      n = (w.empty() ? 1 : w[0] / std::max<int64_t>(p.int_attr("group", 1), 1)) * product(w, 2, w.size());
      break;
    }
    case K::kGemm:
      if (rank == 2) n = p.int_attr("transA", 0) != 0 ? x[0] : x[1];
      break;
    case K::kMatMul:
      if (rank > 0) n = x.back();
      break;
    case K::kMatMulNBits:
      n = p.int_attr("K", 1);
      break;
    case K::kAveragePool: {
      const auto ks = p.ints_attr("kernel");
      n = product(Shape(ks.begin(), ks.end()), 0, ks.size());
      break;
    }
    case K::kGlobalAveragePool:
      n = product(x, 2, rank);
      break;
    case K::kReduceMean:
    case K::kReduceSum:
    case K::kReduceProd:
      for (auto a : p.ints_attr("axes"))
        if (a >= 0 && static_cast<size_t>(a) < rank) n *= x[static_cast<size_t>(a)];
      break;
    case K::kSoftmax:
    case K::kLogSoftmax: {
      const auto axis = static_cast<size_t>(std::max<int64_t>(p.int_attr("axis", 0), 0));
      n = p.int_attr("coerce_2d", 0) != 0 ? product(x, axis, rank) : (axis < rank ? x[axis] : 1);
      break;
    }
    case K::kLayerNormalization:
      n = product(x, static_cast<size_t>(std::max<int64_t>(p.int_attr("axis", 0), 0)), rank);
      break;
    case K::kInstanceNormalization:
      n = product(x, 2, rank);
      break;
    case K::kLRN:
      n = p.int_attr("size", 1);
      break;
    case K::kCumSum: {
      const auto axis = static_cast<size_t>(std::max<int64_t>(p.int_attr("axis", 0), 0));
      n = axis < rank ? x[axis] : 1;
      break;
    }
    case K::kLSTM:
    case K::kGRU:
    case K::kRNN: {  // x: (T, N, I), or (N, T, I) with layout 1; r: (D, gates·H, H)
      const int r = p.input_index("r");
      const Shape& rs = input_shape(p, r < 0 ? p.inputs.size() : static_cast<size_t>(r));
      if (rank == 3 && rs.size() == 3) n = (x[2] + rs[2]) * (p.int_attr("layout", 0) != 0 ? x[1] : x[0]);
      break;
    }
    case K::kMean:
    case K::kSum:
      n = static_cast<int64_t>(p.inputs.size());
      break;
    case K::kResize:  // linear: 2 taps per spatial axis; nearest: 1
      if (p.string_attr("mode", "nearest") != "nearest")
        n = int64_t{1} << std::min<size_t>(rank > 2 ? rank - 2 : 0, 3);
      break;
    case K::kGridSample:  // bilinear: 4 taps (bicubic: 16)
      n = p.string_attr("mode", "bilinear") == "bicubic" ? 16 : 4;
      break;
    case K::kRoiAlign: {  // 4 taps per sample, ratio² samples per bin (adaptive: taken as 4²)
      const int64_t ratio = p.int_attr("sampling_ratio", 0);
      n = 4 * (ratio > 0 ? ratio * ratio : 16);
      break;
    }
    default:  // element-wise and data movement: no sum
      break;
  }
  return std::max<int64_t>(n, 1);
}

Tolerance verify_tolerance(const Problem& p, DType storage, MathMode math, FastAlgorithm algorithm) {
  Tolerance t;
  const std::string where = fmt::format("{} {}/{}", p.op, dtype_name(storage), math_mode_name(math));
  if (storage == DType::kInt8 || math == MathMode::kInt8) {
    t.step = 1;
    t.rule = where + ": one quantization step";
    return t;
  }
  AccuracyClass c = accuracy_class(p.kind);
  if (!p.post_ops.empty() && (c == AccuracyClass::kExact || c == AccuracyClass::kRounded))
    c = AccuracyClass::kTranscendental;
  const int64_t k = accumulation_length(p);
  double ulps = 0;
  switch (c) {
    case AccuracyClass::kExact:
      t.rule = where + ": exact";
      break;
    case AccuracyClass::kRounded:
      ulps = kRoundedUlps;
      t.rule = where + fmt::format(": {:g}·2^-24", ulps);
      break;
    case AccuracyClass::kTranscendental:
      ulps = kTranscendentalUlps;
      t.rule = where + fmt::format(": {:g}·2^-24", ulps);
      break;
    case AccuracyClass::kAccumulating:
      ulps = kAccumulatingUlps + kSqrtKMargin * std::sqrt(static_cast<double>(k));
      t.rule = where + fmt::format(" K={}: ({:g}+{:g}·√K)·2^-24", k, kAccumulatingUlps, kSqrtKMargin);
      break;
    case AccuracyClass::kInterpolating: {
      const Shape& x = input_shape(p, 0);
      int64_t extent = x.size() > 2 ? *std::max_element(x.begin() + 2, x.end()) : 1;
      // RoiAlign's boxes are in the image's coordinates, 1/spatial_scale times the map's.
      const double scale = p.kind == LayerKind::kRoiAlign ? p.float_attr("spatial_scale", 1.0) : 1.0;
      if (scale > 0 && scale < 1)
        extent = static_cast<int64_t>(std::ceil(static_cast<double>(extent) / scale));
      ulps = kAccumulatingUlps + kSqrtKMargin * std::sqrt(static_cast<double>(k)) +
             kPositionUlps * static_cast<double>(extent);
      t.rule = where + fmt::format(" K={} E={}: ({:g}+{:g}·√K+{:g}·E)·2^-24", k, extent, kAccumulatingUlps,
                                   kSqrtKMargin, kPositionUlps);
      break;
    }
  }
  t.rtol = ulps * kF32Roundoff;
  if (c != AccuracyClass::kExact && input_roundoff(math) > 0) {
    t.rtol += kInputRoundings * input_roundoff(math);
    t.rule += fmt::format(" + {:g}·2^{}", kInputRoundings, std::ilogb(input_roundoff(math)));
  }
  if (output_roundoff(storage) > 0) {
    t.rtol += kOutputRoundings * output_roundoff(storage);
    t.rule += fmt::format(" + {:g}·2^{}", kOutputRoundings, std::ilogb(output_roundoff(storage)));
  }
  if (algorithm != FastAlgorithm::kNone && c != AccuracyClass::kExact) {
    t.rtol *= kFastAlgorithmFactor;
    t.rule += fmt::format(", ×{:g} for {}", kFastAlgorithmFactor,
                          algorithm == FastAlgorithm::kWinograd ? "Winograd" : "FFT");
  }
  t.rms_atol = t.rtol;
  return t;
}

Tolerance verify_tolerance(const Problem& p) {
  return verify_tolerance(p, DType::kF32, MathMode::kFp32);
}

Status compare_output(const float* got_in, const HostTensor& expected, const Tolerance& tol) {
  const int64_t n = elements(expected.shape);
  const float* want = expected.data.data();
  double sq = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(want[i])) sq += static_cast<double>(want[i]) * want[i];
  const double rms = n > 0 ? std::sqrt(sq / static_cast<double>(n)) : 0;
  std::vector<float> faulty;
  const float* got = got_in;
  if (g_fault && g_fault->index < n) {
    faulty.assign(got_in, got_in + n);
    faulty[static_cast<size_t>(g_fault->index)] += static_cast<float>(g_fault->scale * rms);
    got = faulty.data();
  }
  const double atol = tol.rms_atol * rms + tol.step;
  int64_t failed = 0, worst = -1;
  double worst_ratio = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    if (g == w || (std::isnan(g) && std::isnan(w))) continue;  // equal infinities too
    const double allowed = atol + tol.rtol * std::abs(w);
    const double d = std::abs(g - w);  // NaN where one only is NaN, inf for one infinity
    const double ratio = std::isnan(d) || std::isinf(d) ? std::numeric_limits<double>::infinity()
                         : allowed > 0                  ? d / allowed
                                                        : std::numeric_limits<double>::infinity();
    if (!(d <= allowed)) ++failed;
    if (ratio > worst_ratio || worst < 0) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  g_last_worst_ratio = worst_ratio;
  if (failed == 0) return {};
  const double w = want[worst];
  return make_error(
      "{} of {} elements differ from the reference beyond the tolerance; the worst, element {} {}: {} vs the "
      "reference's {} (|diff| {:.3g} > tolerance {:.3g} = {:.3g} + {:.3g}·|want|, {})",
      failed, n, worst, multi_index(worst, expected.shape), got[worst], w, std::abs(got[worst] - w),
      atol + tol.rtol * std::abs(w), atol, tol.rtol, tol.rule);
}

double last_worst_ratio() {
  return g_last_worst_ratio;
}

OutputFault::OutputFault(int64_t index, double scale) {
  g_fault = Fault{index, scale};
}
OutputFault::~OutputFault() {
  g_fault.reset();
}

}  // namespace floorline::kernels
