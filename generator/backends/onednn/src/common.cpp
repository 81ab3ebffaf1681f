// The oneDNN backend's common machinery: engine and stream, views, post-op attributes, epilogue
// tensors, activation layouts, memory-format names and random data.
#include <map>

#include <oneapi/dnnl/dnnl_debug.h>

#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

dnnl::engine& cpu_engine() {
  static dnnl::engine e = [] {
    // oneDNN 2.6's implementation iterator answers from the primitive cache, keyed by (descriptor,
    // position), without moving its own cursor: once a primitive of the same descriptor exists,
    // next_impl() returns the first implementation again. Every case builds its own primitive
    // anyway (that is what is timed), so the cache buys nothing here.
    dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}
dnnl::stream& cpu_stream() {
  static dnnl::stream s(cpu_engine());
  return s;
}

// --- tensors and views ----------------------------------------------------------------------------

dims plain_strides(const dims& d) {
  dims st(d.size(), 1);
  for (int k = static_cast<int>(d.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * d[k + 1];
  return st;
}
View plain(const Shape& s) {
  return View{dims(s.begin(), s.end()), plain_strides(dims(s.begin(), s.end())), 0};
}
// The same buffer seen with other dims of the same element count (row-major reshape).
View reshaped(const dims& d) {
  return View{d, plain_strides(d), 0};
}
// A buffer of shape `stored` seen in the dim order `order` (view dim k is stored dim order[k]).
View permuted(const Shape& stored, const std::vector<int64_t>& order) {
  const dims st = plain_strides(dims(stored.begin(), stored.end()));
  View v;
  for (auto k : order) {
    v.d.push_back(stored[k]);
    v.strides.push_back(st[k]);
  }
  return v;
}
// Pads a shape with leading 1s to rank r (NumPy broadcasting).
Shape rank_padded(Shape s, size_t r) {
  while (s.size() < r) s.insert(s.begin(), 1);
  return s;
}

// --- activation layouts -------------------------------------------------------------------------

// Layout-agnostic primitives (batch normalization, pooling, concat) are also offered on the two
// activation layouts oneDNN's convolutions write, as variants "<primitive>@blocked<B>c" (aBcd<B>b,
// nChw<B>c) and "<primitive>@channels_last" (acdb, NHWC): a runtime that keeps convolutions'
// layouts between layers runs them so, and their plain-layout implementations can be far slower.
// B is the channel block the convolutions write on this host (native_channel_block()): 16 with
// AVX-512, 8 with AVX2; a fixed 16 would need a conversion before every such layer on AVX2 hosts.
// The suffix of a variant; "" for the plain layout.
std::string layout_suffix(const std::string& variant) {
  const auto at = variant.find('@');
  return at == std::string::npos ? "" : variant.substr(at + 1);
}
// The variant without its layout suffix.
std::string base_variant(const std::string& variant) {
  return variant.substr(0, variant.find('@'));
}

int64_t native_channel_block() {
  static const int64_t block = [] {
    // The first channel-blocked destination format, in oneDNN's order of implementations, of a
    // mid-network 3x3 convolution (64 channels, 28x28: ResNet's second stage) free to choose its
    // formats. (The first implementation may write channels-last: brgconv on AVX-512 does.)
    try {
      const dims x{1, 64, 28, 28}, w{64, 64, 3, 3};
      const memory::desc any_x(x, dt::f32, memory::format_tag::any);
      const memory::desc any_w(w, dt::f32, memory::format_tag::any);
      dnnl::convolution_forward::desc d(kInference, algorithm::convolution_direct, any_x, any_w, any_x,
                                        {1, 1}, {0, 0}, {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, cpu_engine());
      do {
        const auto& md = pd.dst_desc().data;
        const auto& blocking = md.format_desc.blocking;
        if (md.format_kind == dnnl_blocked && blocking.inner_nblks == 1 && blocking.inner_idxs[0] == 1)
          return static_cast<int64_t>(blocking.inner_blks[0]);
      } while (pd.next_impl());
    } catch (const dnnl::error&) {
    }
    return int64_t{0};  // no implementation writes a channel-blocked layout: no blocked variant
  }();
  return block;
}

// The memory descriptor of an activation of shape `s` in the variant's layout (plain without one).
memory::desc activation_md(const Ctx& c, int t, const Shape& s, const std::string& variant) {
  const std::string layout = layout_suffix(variant);
  const dims d(s.begin(), s.end());
  if (layout.empty()) return c.md(t, plain(s));
  using tag = memory::format_tag;
  static const std::map<std::pair<std::string, size_t>, tag> kTags = {
      {{"blocked4c", 3}, tag::aBc4b},     {{"blocked4c", 4}, tag::aBcd4b},
      {{"blocked4c", 5}, tag::aBcde4b},   {{"blocked8c", 3}, tag::aBc8b},
      {{"blocked8c", 4}, tag::aBcd8b},    {{"blocked8c", 5}, tag::aBcde8b},
      {{"blocked16c", 3}, tag::aBc16b},   {{"blocked16c", 4}, tag::aBcd16b},
      {{"blocked16c", 5}, tag::aBcde16b}, {{"channels_last", 3}, tag::acb},
      {{"channels_last", 4}, tag::acdb},  {{"channels_last", 5}, tag::acdeb}};
  auto it = kTags.find({layout, s.size()});
  if (it == kTags.end()) unsupported(fmt::format("no {} layout for a rank-{} tensor", layout, s.size()));
  return memory::desc(d, c.type_of(t), it->second);
}

// --- post-ops and epilogues -----------------------------------------------------------------------

primitive_attr Ctx::attr(bool with_post_ops) const {
  primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (spec.variant.math_mode == MathMode::kBF16 && type == dt::f32)
    a.set_fpmath_mode(dnnl::fpmath_mode::bf16);
  if (with_post_ops && !p.post_ops.empty()) {
    dnnl::post_ops po;
    for (const auto& op : p.post_ops) {
      if (op.op == "Add") {
        po.append_sum(1.f);
        continue;
      }
      if (op.op == "BiasAdd") continue;  // the primitive's own bias argument
      if (op.op == "Swish") {            // x·sigmoid(alpha·x), alpha 1
        po.append_eltwise(1.f, algorithm::eltwise_swish, 1.f, 0.f);
        continue;
      }
      // A post-op names the ONNX op it fuses: its kind is the same name (layer_kind.hpp).
      const auto kind = kind_from_name(op.op);
      const auto chain = kind ? eltwise_chain(*kind, op.alpha, op.beta, nullptr) : std::vector<EltwiseOp>{};
      if (chain.empty()) unsupported(fmt::format("no oneDNN post-op for {}", op.op));
      for (const auto& e : chain) po.append_eltwise(1.f, e.alg, e.alpha, e.beta);
    }
    a.set_post_ops(po);
  }
  return a;
}

// A post-op list may only be given to primitives that take one.
void require_no_post_ops(const Ctx& c) {
  if (!c.p.post_ops.empty()) unsupported(fmt::format("Floorline fuses no epilogue into {}", c.p.op));
}

Epilogue epilogue_tensors(Ctx& c, const Shape& bias_shape) {
  Epilogue e;
  for (const auto& op : c.p.post_ops) {
    if (op.op == "Add" && e.sum < 0)
      e.sum = c.extra(c.out_shape());
    else if (op.op == "BiasAdd" && e.bias < 0 && !bias_shape.empty())
      e.bias = c.extra(bias_shape);
    else if (op.op == "Add" || op.op == "BiasAdd")
      unsupported(fmt::format("{} cannot be fused here", op.op));
  }
  return e;
}

int sum_prefill(Ctx& c) {
  return epilogue_tensors(c, {}).sum;
}

// --- memory formats, for layouts and conversions --------------------------------------------------

// The name of a memory descriptor's format ("aBcd16b"), found by comparing against every format tag
// of its rank; "strided" when it is a plain layout with unusual strides, "blocked" otherwise.
std::string format_name(const memory::desc& md) {
  if (const auto tag = format_tag_of(md)) return dnnl_fmt_tag2str(static_cast<dnnl_format_tag_t>(*tag));
  return md.data.format_desc.blocking.inner_nblks == 0 ? "strided" : "blocked";
}

std::optional<memory::format_tag> format_tag_of(const memory::desc& md) {
  const int ndims = md.data.ndims;
  for (int t = static_cast<int>(dnnl_a); t < static_cast<int>(dnnl_format_tag_last); ++t) {
    dnnl_memory_desc_t candidate;
    if (dnnl_memory_desc_init_by_tag(&candidate, ndims, md.data.dims, md.data.data_type,
                                     static_cast<dnnl_format_tag_t>(t)) != dnnl_success)
      continue;
    if (dnnl_memory_desc_equal(&candidate, &md.data)) return static_cast<memory::format_tag>(t);
  }
  return std::nullopt;
}

bool is_plain(const memory::desc& md) {
  return md == memory::desc(md.dims(), md.data_type(), plain_strides(md.dims()));
}

std::string dtype_name(dt t) {
  switch (t) {
    case dt::f32:
      return "f32";
    case dt::bf16:
      return "bf16";
    case dt::f16:
      return "f16";
    case dt::s8:
      return "s8";
    case dt::u8:
      return "u8";
    case dt::s32:
      return "s32";
    default:
      return "?";
  }
}

// A port's layout as replay compares it (kernel.hpp, Port::layout).
std::string port_layout(const memory::desc& md) {
  return is_plain(md) ? "plain"
                      : fmt::format("{} {} {}", dtype_name(md.data_type()), format_name(md),
                                    fmt::join(md.dims(), "x"));
}

// --- random data ----------------------------------------------------------------------------------

// The kernel API's fill (random.hpp), different per tensor (seeded by the tensor's position).
void fill_random(float* out, int64_t n, Fill f, uint64_t seed) {
  // [-1, 1) by default; [0.5, 1.5) where the op needs positive inputs (variance, divisor, log, sqrt);
  // [-1/16, 1/16) for recurrent weights (Fill::kSmall).
  const float lo = f == Fill::kPositive ? 0.5f : f == Fill::kSmall ? -0.0625f : -1.f;
  const float span = f == Fill::kPositive ? 1.f : f == Fill::kSmall ? 0.125f : 2.f;
  fill_uniform(out, n, seed, lo, span);
}

// Whole numbers in [lo, hi], exact in f32 and in every integer type that holds the range.
void fill_integers(float* out, int64_t n, int64_t lo, int64_t hi, uint64_t seed) {
  fill_random(out, n, Fill::kUniform, seed);
  const double span = static_cast<double>(hi - lo + 1);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(std::min<double>(
        static_cast<double>(hi), static_cast<double>(lo) + std::floor((out[i] + 1.0) / 2.0 * span)));
}

}  // namespace floorline::kernels::onednn_detail
