// Floorline's own kernels planned beside oneDNN's primitives (the floorline backend's concat,
// softmax, log_softmax, reductions, binary ops, expand, tile, and copy for an identity Resize):
// planned for the real zoo layers where ONNX Runtime's kernel beat every oneDNN implementation, and
// verified against the reference on them.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "floorline/common/isa.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/kernels/buffer.hpp"
#include "floorline/kernels/floorline.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::gen {
namespace {

// The model with only its layers of `ops` (planning the rest is not the point here).
std::vector<mp::ModelIR> zoo_layers(const std::string& model, const std::set<std::string>& ops) {
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + model + ".onnx", {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return {};
  for (auto& m : *r) std::erase_if(m.layers, [&](const mp::Layer& l) { return !ops.count(l.op_type); });
  return *r;
}

// `spec` built on the floorline backend and verified against the reference at `threads` threads:
// the kernel, or null (the failure recorded) where it cannot be built.
std::unique_ptr<kernels::Kernel> verified_kernel(const kernels::CaseSpec& spec, int threads) {
  auto k = kernels::make_floorline_kernel(spec);
  if (!k.ok()) {
    ADD_FAILURE() << spec.problem.key << ": " << k.error().message;
    return nullptr;
  }
  const Status v = (*k)->verify();
  EXPECT_TRUE(v.ok()) << spec.problem.key << " at " << threads
                      << " thread(s): " << (v.ok() ? "" : v.error().message);
  return std::move(*k);
}

struct Seen {
  std::set<std::string> keys_with_own;  // layer keys with a planned floorline case
  std::set<std::string> keys_with_onednn;
  int own_cases = 0;  // planned floorline cases (a layer key may have several: its blocked forms)
  int verified = 0;
};

// Every planned floorline case (the kernel `algorithm`): built, verified, run again; and which
// layer keys have it and which have a oneDNN primitive case beside it.
Seen verify_own(const std::vector<mp::ModelIR>& models, const std::string& algorithm) {
  const Plan plan = make_plan(models, {find_backend("onednn"), find_backend("floorline")}, PlanOptions{});
  Seen seen;
  for (const auto& c : plan.cases) {
    if (c.status || !c.spec.feeds.empty() || c.spec.variant.dtype != DType::kF32) continue;
    if (!is_own_kernel(c.spec.variant)) {
      EXPECT_EQ(c.spec.variant.backend, "onednn") << c.spec.name;
      seen.keys_with_onednn.insert(c.spec.problem.key);
      continue;
    }
    EXPECT_EQ(c.spec.variant.backend, "floorline") << c.spec.name;
    // The kernel, or its blocked-layout form (concat@blocked16c).
    EXPECT_EQ(c.spec.variant.algorithm.substr(0, c.spec.variant.algorithm.find('@')), algorithm)
        << c.spec.name;
    seen.keys_with_own.insert(c.spec.problem.key);
    ++seen.own_cases;
    auto k = kernels::make_floorline_kernel(c.spec);
    EXPECT_TRUE(k.ok()) << c.spec.name << ": " << (k.ok() ? "" : k.error().message);
    if (!k.ok()) continue;
    EXPECT_EQ((*k)->implementation(), "floorline " + algorithm);
    const Status s = (*k)->verify();
    EXPECT_TRUE(s.ok()) << c.spec.name << ": " << (s.ok() ? "" : s.error().message);
    (*k)->run();  // a timed call runs again on the same buffers
    if (s.ok()) ++seen.verified;
  }
  return seen;
}

// The NCHW <-> NHWC transpose (XNNPACK's conversions) on both of its tile shapes: 32 x 32, and 8 x 64
// where a row is a multiple of 4 KiB (1024 floats: 224 x 224 pixels are 49 of them), with partial
// tiles in both directions, two matrices, every element checked.
TEST(DataKernels, TiledTransposeMovesEveryElementOnBothTileShapes) {
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {43, 1024}, {1024, 43}, {3, 2048}, {2048, 3}, {40, 784}, {784, 40}, {8, 64}, {1, 1}}) {
    const int64_t batch = 2, n = batch * rows * cols;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n), -1.f);
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
    const kernels::TiledTranspose t{x.data(), y.data(), batch, rows, cols};
    for (int64_t i = t.tiles() - 1; i >= 0; --i) t.tile(i);  // any order: the tiles are independent
    int64_t wrong = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          wrong += y[static_cast<size_t>(b * rows * cols + c * rows + r)] !=
                   x[static_cast<size_t>(b * rows * cols + r * cols + c)];
    EXPECT_EQ(wrong, 0) << rows << " x " << cols;
  }
}

TEST(DataKernels, SwinAndGooglenetConcatsAreCopiedChunksBesideOnednnConcat) {
  for (const std::string model : {"swin_t", "googlenet", "squeezenet1_1"}) {
    const Seen s = verify_own(zoo_layers(model, {"Concat"}), "concat");
    EXPECT_GE(s.verified, 1) << model;
    if (model == "swin_t") {
      // The shifted-window roll: 53 + 3 rows along H, and 53 + 3 columns along W.
      const std::string h = "Concat|x0=1x53x56x96|x1=1x3x56x96|axis=1|f32";
      const std::string w = "Concat|x0=1x56x53x96|x1=1x56x3x96|axis=2|f32";
      EXPECT_TRUE(s.keys_with_own.count(h) && s.keys_with_own.count(w))
          << fmt::format("{}", fmt::join(s.keys_with_own, ", "));
      EXPECT_TRUE(s.keys_with_onednn.count(h));  // beside oneDNN's, not instead
    }
    if (model == "googlenet") {
      EXPECT_TRUE(s.keys_with_own.count(
          "Concat|x0=1x64x28x28|x1=1x128x28x28|x2=1x32x28x28|x3=1x32x28x28|axis=1|f32"));
    }
  }
}

// DenseNet's concats (growth 32) also run on oneDNN's blocked layouts: the same copies, with ports
// named as oneDNN's aBcd16b / aBcd8b, so that the replay wires the convolutions' blocked outputs
// in without a conversion. A concat whose channels are no multiple of 8 gets no such case.
TEST(DataKernels, DensenetConcatsRunOnTheBlockedLayoutsToo) {
  const auto models = zoo_layers("densenet121", {"Concat"});
  const Plan plan = make_plan(models, {find_backend("floorline")}, PlanOptions{});
  int blocked16 = 0, blocked8 = 0;
  for (const auto& c : plan.cases) {
    if (c.status || c.spec.variant.algorithm.find("@blocked") == std::string::npos) continue;
    const int block = c.spec.variant.algorithm == "concat@blocked16c" ? 16 : 8;
    (block == 16 ? blocked16 : blocked8) += 1;
    auto k = kernels::make_floorline_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    EXPECT_TRUE((*k)->verify().ok()) << c.spec.name;
    const auto out = (*k)->port(true, 0);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->layout, kernels::blocked_channels_layout(block, c.spec.problem.outputs[0].shape));
    EXPECT_EQ(out->layout,
              fmt::format("f32 aBcd{}b {}", block, fmt::join(c.spec.problem.outputs[0].shape, "x")));
    int64_t n = 1;
    for (const int64_t d : c.spec.problem.outputs[0].shape) n *= d;
    EXPECT_EQ(out->bytes, n * 4);
  }
  EXPECT_EQ(blocked16, 62);  // every one of densenet121's 62 concats
  EXPECT_EQ(blocked8, 62);
  // Inputs of 12 and 16 channels on aBcd8b: the second input's lanes move by 4 (channels.cpp).
  kernels::CaseSpec odd;
  odd.problem.kind = LayerKind::kConcat;
  odd.problem.op = "Concat";
  odd.problem.key = "Concat|odd";
  odd.problem.inputs = {{"x0", {2, 12, 4, 3}}, {"x1", {2, 17, 4, 3}}};
  odd.problem.outputs = {{"y", {2, 29, 4, 3}}};
  odd.problem.ints["axis"] = {1};
  odd.variant.backend = "floorline";
  odd.variant.dtype = DType::kF32;
  for (const int block : {8, 16}) {
    odd.variant.algorithm = fmt::format("concat@blocked{}c", block);
    auto k = kernels::make_floorline_kernel(odd);
    ASSERT_TRUE(k.ok()) << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << odd.variant.algorithm << ": " << (v.ok() ? "" : v.error().message);
    const auto out = (*k)->port(true, 0);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->layout, kernels::blocked_channels_layout(block, {2, 29, 4, 3}));
    EXPECT_EQ(out->bytes, 2 * 32 * 4 * 3 * 4);  // 29 channels padded to 32 in both block sizes
  }
}

// ShuffleNet's channel movements (channels.cpp): its Concats (58 + 58 and 116 + 116 channels: no
// multiple of 8 or 16), channel shuffles (Transpose of [1, 2, K, H, W] by 0,2,1,3,4) and channel
// Slices, each planned plain and on both blocked layouts, verify against the reference, and their
// ports are the layouts of the 4-D tensors around them: the shuffle's are named by the 4-D dims
// around its Reshapes (the replay carries a layout through a view), padded to whole blocks.
TEST(DataKernels, ShuffleNetsConcatShuffleAndSlicesRunPlainAndOnTheBlockedLayouts) {
  const auto models = zoo_layers("shufflenet_v2_x1_0", {"Concat", "Transpose", "Slice"});
  const Plan plan = make_plan(models, {find_backend("floorline")}, PlanOptions{});
  std::map<std::string, int> seen;  // algorithm → verified cases
  auto padded_bytes = [](const std::vector<int64_t>& s, int block) {
    return s[0] * ((s[1] + block - 1) / block) * block * s[2] * s[3] * 4;
  };
  for (const auto& c : plan.cases) {
    if (c.status || c.spec.variant.backend != "floorline") continue;
    const auto& p = c.spec.problem;
    auto k = kernels::make_floorline_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    if (!v.ok()) continue;
    (*k)->run();
    ++seen[c.spec.variant.algorithm];
    // The 4-D tensors the case reads and writes (a shuffle's: [N, G·K, H, W] both).
    auto four_d = [&](const std::vector<int64_t>& s) {
      return s.size() == 5 ? std::vector<int64_t>{s[0], s[1] * s[2], s[3], s[4]} : s;
    };
    const auto in = (*k)->port(false, 0), out = (*k)->port(true, 0);
    ASSERT_TRUE(in && out);
    if (c.spec.variant.algorithm.ends_with("@nhwc")) {  // channels-last, as XNNPACK's NHWC ports
      EXPECT_EQ(in->layout, kernels::channels_last_layout(four_d(p.inputs[0].shape))) << c.spec.name;
      EXPECT_EQ(out->layout, kernels::channels_last_layout(four_d(p.outputs[0].shape))) << c.spec.name;
      EXPECT_EQ(out->bytes, 4 * kernels::elements(p.outputs[0].shape)) << c.spec.name;
      continue;
    }
    const auto at = c.spec.variant.algorithm.find("@blocked");
    if (at == std::string::npos) continue;
    const int block = std::stoi(c.spec.variant.algorithm.substr(at + 8));
    EXPECT_EQ(in->layout, kernels::blocked_channels_layout(block, four_d(p.inputs[0].shape))) << c.spec.name;
    EXPECT_EQ(out->layout, kernels::blocked_channels_layout(block, four_d(p.outputs[0].shape)))
        << c.spec.name;
    EXPECT_EQ(out->bytes, padded_bytes(four_d(p.outputs[0].shape), block)) << c.spec.name;
  }
  // 3 concats, 3 shuffles and 6 slices in shufflenet_v2_x1_0 (batch 1), each in four layouts.
  for (const char* name : {"concat", "channel_shuffle", "slice"})
    for (const std::string suffix : {"", "@blocked8c", "@blocked16c", "@nhwc"}) {
      const std::string algorithm = name + suffix;
      EXPECT_EQ(seen[algorithm], std::string(name) == "slice" ? 6 : 3) << algorithm;
    }
}

// Hand-made channel movements, in every layout (plain, blocked, channels-last): a Split into 3, 10
// and 4 channels of two images; a Slice of channels 13 to 33 that names another axis too, taken
// whole; a shuffle of 3 groups of 5 (channels-last: runs of one channel); and what
// is no movement of whole channels (a Transpose of other axes, a Slice with a step) has no kernel.
TEST(DataKernels, SplitSliceAndShuffleOfOddChannelCountsVerifyInEveryLayout) {
  auto spec = [](LayerKind kind, const char* op, std::vector<kernels::Operand> in,
                 std::vector<kernels::Operand> out) {
    kernels::CaseSpec c;
    c.problem.kind = kind;
    c.problem.op = op;
    c.problem.key = std::string(op) + "|hand-made";
    c.problem.inputs = std::move(in);
    c.problem.outputs = std::move(out);
    c.variant.backend = "floorline";
    c.variant.dtype = DType::kF32;
    return c;
  };
  auto split = spec(LayerKind::kSplit, "Split", {{"x", {2, 17, 3, 5}}},
                    {{"y0", {2, 3, 3, 5}}, {"y1", {2, 10, 3, 5}}, {"y2", {2, 4, 3, 5}}});
  split.problem.ints["axis"] = {1};
  auto slice = spec(LayerKind::kSlice, "Slice", {{"x", {1, 40, 6, 6}}}, {{"y", {1, 21, 6, 6}}});
  slice.problem.ints["starts"] = {13, 0};
  slice.problem.ints["axes"] = {1, 2};
  slice.problem.ints["steps"] = {1, 1};
  auto shuffle = spec(LayerKind::kTranspose, "Transpose", {{"x", {2, 3, 5, 4, 4}}}, {{"y", {2, 5, 3, 4, 4}}});
  shuffle.problem.ints["perm"] = {0, 2, 1, 3, 4};
  // 2 groups of 13 at batch 2: the pairs of lane groups that interleave two runs (the second run
  // across two input lane groups), and a last group of 2 real lanes, in each image.
  auto shuffle2 =
      spec(LayerKind::kTranspose, "Transpose", {{"x", {2, 2, 13, 4, 5}}}, {{"y", {2, 13, 2, 4, 5}}});
  shuffle2.problem.ints["perm"] = {0, 2, 1, 3, 4};
  const std::vector<std::pair<std::string, kernels::CaseSpec>> cases = {
      {"split", split}, {"slice", slice}, {"channel_shuffle", shuffle}, {"channel_shuffle", shuffle2}};
  for (const auto& [name, base] : cases) {
    EXPECT_EQ(kernels::floorline_kernel_name(base.problem), name);
    for (const std::string suffix : {"", "@blocked8c", "@blocked16c", "@nhwc"}) {
      kernels::CaseSpec c = base;
      c.variant.algorithm = name + suffix;
      auto k = kernels::make_floorline_kernel(c);
      ASSERT_TRUE(k.ok()) << c.variant.algorithm << ": " << k.error().message;
      const Status v = (*k)->verify();
      EXPECT_TRUE(v.ok()) << c.variant.algorithm << ": " << (v.ok() ? "" : v.error().message);
      EXPECT_EQ((*k)->port(true, base.problem.outputs.size() - 1).has_value(), true);
      EXPECT_FALSE((*k)->port(true, base.problem.outputs.size()).has_value());
    }
  }
  // Not whole channels: no channel kernel; the general ones where they apply (VitTransposes...).
  auto other = spec(LayerKind::kTranspose, "Transpose", {{"x", {2, 3, 5, 4, 4}}}, {{"y", {2, 3, 5, 4, 4}}});
  other.problem.ints["perm"] = {0, 1, 2, 4, 3};
  EXPECT_EQ(kernels::floorline_kernel_name(other.problem), "");  // the last axis moves
  auto stepped = slice;
  stepped.problem.ints["steps"] = {2, 1};
  stepped.problem.outputs = {{"y", {1, 11, 6, 6}}};
  EXPECT_EQ(kernels::floorline_kernel_name(stepped.problem), "copy_runs");
  stepped.variant.algorithm = "slice";
  auto k = kernels::make_floorline_kernel(stepped);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported) << k.error().message;
}

// efficientnet_b0's squeeze-and-excitation blocks on oneDNN's blocked layouts: the pool reads the
// depthwise convolution's blocked output and writes its [1, C, 1, 1] means blocked too; the scale
// (per channel, plain) multiplies the blocked tensor. Every case verifies, with the ports the replay
// wires (padded blocks where C is no multiple of the block), and oneDNN's pooling is planned beside
// them (efficientnet's SE channel counts are multiples of 16). A hand-made odd case: 58 channels
// (padded in both block sizes), two images, a per-channel first operand of a
// Sub and a second of a Div.
TEST(DataKernels, SqueezeExcitationPoolAndScaleRunOnTheBlockedLayouts) {
  const auto models = zoo_layers("efficientnet_b0", {"GlobalAveragePool", "Mul"});
  const Plan plan = make_plan(models, {find_backend("onednn"), find_backend("floorline")}, PlanOptions{});
  int pools = 0, scales = 0, onednn_pools = 0;
  auto padded_bytes = [](const std::vector<int64_t>& s, int block) {
    return s[0] * ((s[1] + block - 1) / block) * block * s[2] * s[3] * 4;
  };
  for (const auto& c : plan.cases) {
    if (c.status || !c.spec.feeds.empty() || c.spec.variant.dtype != DType::kF32) continue;
    const auto& p = c.spec.problem;
    if (c.spec.variant.backend == "onednn" && p.kind == LayerKind::kGlobalAveragePool &&
        c.spec.variant.algorithm.rfind("pooling_v2", 0) == 0)
      ++onednn_pools;
    const auto at = c.spec.variant.algorithm.find("@blocked");
    if (c.spec.variant.backend != "floorline" || at == std::string::npos) continue;
    const int block = std::stoi(c.spec.variant.algorithm.substr(at + 8));
    ASSERT_TRUE(block == 8 || block == 16) << c.spec.name;
    auto k = kernels::make_floorline_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    (*k)->run();
    const std::vector<int64_t>& y = p.outputs[0].shape;
    const auto out = (*k)->port(true, 0);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->layout, kernels::blocked_channels_layout(block, y));
    EXPECT_EQ(out->bytes, padded_bytes(y, block)) << c.spec.name;
    if (p.kind == LayerKind::kGlobalAveragePool) {
      ++pools;
      const auto in = (*k)->port(false, 0);
      ASSERT_TRUE(in.has_value());
      EXPECT_EQ(in->layout, kernels::blocked_channels_layout(block, p.inputs[0].shape));
      EXPECT_EQ(in->bytes, padded_bytes(p.inputs[0].shape, block));
    } else if (p.inputs[0].shape != p.inputs[1].shape) {
      ++scales;
      for (size_t i = 0; i < 2; ++i) {
        const auto in = (*k)->port(false, i);
        ASSERT_TRUE(in.has_value());
        EXPECT_EQ(in->layout, p.inputs[i].shape == y ? kernels::blocked_channels_layout(block, y) : "plain")
            << c.spec.name << " input " << i;
      }
    }
  }
  EXPECT_GE(pools, 2 * 6);   // 6 or more distinct pools, each at blocks 8 and 16
  EXPECT_GE(scales, 2 * 6);  // and as many scales
  EXPECT_GT(onednn_pools, 0);
  for (const LayerKind kind : {LayerKind::kSub, LayerKind::kDiv})
    for (const int block : {8, 16}) {
      kernels::CaseSpec odd;
      odd.problem.kind = kind;
      odd.problem.op = kind == LayerKind::kSub ? "Sub" : "Div";
      odd.problem.key = "odd";
      const std::vector<int64_t> full = {2, 58, 5, 3}, channel = {2, 58, 1, 1};
      odd.problem.inputs = {{"a", kind == LayerKind::kSub ? channel : full},
                            {"b", kind == LayerKind::kSub ? full : channel}};
      odd.problem.outputs = {{"y", full}};
      odd.variant.backend = "floorline";
      odd.variant.dtype = DType::kF32;
      odd.variant.algorithm = fmt::format("binary@blocked{}c", block);
      auto k = kernels::make_floorline_kernel(odd);
      ASSERT_TRUE(k.ok()) << k.error().message;
      const Status v = (*k)->verify();
      EXPECT_TRUE(v.ok()) << odd.variant.algorithm << " " << odd.problem.op << ": "
                          << (v.ok() ? "" : v.error().message);
      // On zero-padded inputs (as a oneDNN convolution writes them), the output's padding lanes
      // are zero: not 0 / 0 (58 channels: lanes 58..63 of the last 8-block, 58..63 of the 16-block).
      const auto a_port = (*k)->port(false, 0), b_port = (*k)->port(false, 1), y_port = (*k)->port(true, 0);
      ASSERT_TRUE(a_port && b_port && y_port);
      std::memset(a_port->data, 0, static_cast<size_t>(a_port->bytes));
      std::memset(b_port->data, 0, static_cast<size_t>(b_port->bytes));
      (*k)->run();
      const float* yv = static_cast<const float*>(y_port->data);
      const int64_t groups = (58 + block - 1) / block;
      int nonzero_pad = 0;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t i = 0; i < 15; ++i)
          for (int64_t l = 58 - (groups - 1) * block; l < block; ++l)
            nonzero_pad += yv[((n * groups + groups - 1) * 15 + i) * block + l] != 0.f ? 1 : 0;
      EXPECT_EQ(nonzero_pad, 0) << odd.variant.algorithm << " " << odd.problem.op;
      odd.problem.kind = LayerKind::kGlobalAveragePool;
      odd.problem.op = "GlobalAveragePool";
      odd.problem.inputs = {{"x", full}};
      odd.problem.outputs = {{"y", channel}};
      odd.variant.algorithm = fmt::format("global_average_pool@blocked{}c", block);
      auto g = kernels::make_floorline_kernel(odd);
      ASSERT_TRUE(g.ok()) << g.error().message;
      const Status gv = (*g)->verify();
      EXPECT_TRUE(gv.ok()) << odd.variant.algorithm << ": " << (gv.ok() ? "" : gv.error().message);
    }
}

// The same SE blocks channels-last (global_average_pool@nhwc, binary@nhwc), where XNNPACK's NHWC
// convolutions or oneDNN's channels-last depthwise ones write the pool's input and read the scale's
// output: planned for every efficientnet_b0 pool and scale and verified there, with NHWC ports (the
// pool's [1, C, 1, 1] output plain); and hand-made forms at 1 and 2 threads: channel counts with a
// tail past the last 8 (13, 58), more than one part's 64 (1152), two images, a residual Add of two
// full operands and per-channel operands first and second.
TEST(DataKernels, SqueezeExcitationPoolAndScaleRunChannelsLast) {
  const auto models = zoo_layers("efficientnet_b0", {"GlobalAveragePool", "Mul"});
  const Plan plan = make_plan(models, {find_backend("floorline")}, PlanOptions{});
  int pools = 0, scales = 0;
  for (const auto& c : plan.cases) {
    if (c.status || c.spec.variant.algorithm.find("@nhwc") == std::string::npos) continue;
    const auto& p = c.spec.problem;
    auto k = kernels::make_floorline_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    const auto out = (*k)->port(true, 0);
    ASSERT_TRUE(out.has_value());
    if (p.kind == LayerKind::kGlobalAveragePool) {
      ++pools;
      const auto in = (*k)->port(false, 0);
      ASSERT_TRUE(in.has_value());
      EXPECT_EQ(in->layout, kernels::channels_last_layout(p.inputs[0].shape)) << c.spec.name;
      EXPECT_EQ(out->layout, "plain");
      continue;
    }
    EXPECT_EQ(out->layout, kernels::channels_last_layout(p.outputs[0].shape)) << c.spec.name;
    for (size_t i = 0; i < 2; ++i) {  // the full operands channels-last, the SE block's [1, C, 1, 1] plain
      const auto in = (*k)->port(false, i);
      ASSERT_TRUE(in.has_value());
      EXPECT_EQ(in->layout, p.inputs[i].shape == p.outputs[0].shape
                                ? kernels::channels_last_layout(p.outputs[0].shape)
                                : std::string("plain"))
          << c.spec.name << " input " << i;
    }
    if (p.inputs[0].shape != p.inputs[1].shape) ++scales;
  }
  EXPECT_GE(pools, 6);
  EXPECT_GE(scales, 6);

  struct Form {
    LayerKind kind;
    const char* op;
    bool a_full, b_full;
  };
  const Form forms[] = {{LayerKind::kGlobalAveragePool, "GlobalAveragePool", true, false},
                        {LayerKind::kAdd, "Add", true, true},
                        {LayerKind::kMul, "Mul", true, false},
                        {LayerKind::kSub, "Sub", false, true},
                        {LayerKind::kDiv, "Div", true, false}};
  const std::vector<std::vector<int64_t>> shapes = {{2, 58, 5, 3}, {1, 13, 7, 7}, {1, 1152, 7, 7}};
  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);
    for (const auto& full : shapes)
      for (const Form& f : forms) {
        const std::vector<int64_t> channel = {full[0], full[1], 1, 1};
        kernels::CaseSpec spec;
        spec.problem.kind = f.kind;
        spec.problem.op = f.op;
        spec.problem.key = fmt::format("{}|{}", f.op, fmt::join(full, "x"));
        if (f.kind == LayerKind::kGlobalAveragePool) {
          spec.problem.inputs = {{"x", full}};
          spec.problem.outputs = {{"y", channel}};
          spec.variant.algorithm = "global_average_pool@nhwc";
        } else {
          spec.problem.inputs = {{"a", f.a_full ? full : channel}, {"b", f.b_full ? full : channel}};
          spec.problem.outputs = {{"y", full}};
          spec.variant.algorithm = "binary@nhwc";
        }
        spec.variant.backend = "floorline";
        spec.variant.dtype = DType::kF32;
        auto k = kernels::make_floorline_kernel(spec);
        ASSERT_TRUE(k.ok()) << spec.problem.key << ": " << k.error().message;
        const Status v = (*k)->verify();
        EXPECT_TRUE(v.ok()) << spec.problem.key << " at " << threads
                            << " thread(s): " << (v.ok() ? "" : v.error().message);
      }
  }
  kernels::set_floorline_threads(1);
  // Two per-channel operands, or one pixel, are no channels-last case.
  kernels::CaseSpec both;
  both.problem.kind = LayerKind::kMul;
  both.problem.op = "Mul";
  both.problem.inputs = {{"a", {1, 8, 1, 1}}, {"b", {1, 8, 1, 1}}};
  both.problem.outputs = {{"y", {1, 8, 1, 1}}};
  both.variant.backend = "floorline";
  both.variant.dtype = DType::kF32;
  both.variant.algorithm = "binary@nhwc";
  auto k = kernels::make_floorline_kernel(both);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported) << k.error().message;
}

// The replay's conversion of Floorline's (make_floorline_conversion): plain to aBcd8b / aBcd16b and
// back, between two cases' ports, on 58 channels (a padded last block) and 15 pixels (one 8-pixel
// transpose and a tail of 7), two images: every value where the layout puts it, the padding lanes
// zero, and the round trip exact. Other layouts are not its.
TEST(DataKernels, FloorlineConvertsBetweenPlainAndBlockedPorts) {
  const std::vector<int64_t> dims = {2, 58, 5, 3};
  const int64_t c = dims[1], hw = dims[2] * dims[3];
  auto pool = [&](const std::string& algorithm) {
    kernels::CaseSpec spec;
    spec.problem.kind = LayerKind::kGlobalAveragePool;
    spec.problem.op = "GlobalAveragePool";
    spec.problem.key = "GlobalAveragePool|x=2x58x5x3|f32";
    spec.problem.inputs = {{"x", dims}};
    spec.problem.outputs = {{"y", {2, 58, 1, 1}}};
    spec.variant.backend = "floorline";
    spec.variant.dtype = DType::kF32;
    spec.variant.algorithm = algorithm;
    auto k = kernels::make_floorline_kernel(spec);
    EXPECT_TRUE(k.ok()) << algorithm << ": " << (k.ok() ? "" : k.error().message);
    return k.ok() ? std::move(*k) : nullptr;
  };
  auto plain = pool("global_average_pool");
  ASSERT_NE(plain, nullptr);
  const auto plain_port = plain->port(false, 0);
  ASSERT_TRUE(plain_port.has_value());
  float* x = static_cast<float*>(plain_port->data);
  for (int64_t e = 0; e < 2 * c * hw; ++e) x[e] = static_cast<float>(e + 1);
  for (const int block : {8, 16}) {
    auto blocked = pool(fmt::format("global_average_pool@blocked{}c", block));
    ASSERT_NE(blocked, nullptr);
    auto to =
        kernels::make_floorline_conversion({plain.get(), false, 0, x}, {blocked.get(), false, 0, nullptr});
    ASSERT_TRUE(to.ok()) << to.error().message;
    (*to)->run();
    const auto out = (*to)->port(true, 0);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->layout, kernels::blocked_channels_layout(block, dims));
    const int64_t groups = (c + block - 1) / block;
    EXPECT_EQ(out->bytes, 2 * groups * block * hw * 4);
    const float* y = static_cast<const float*>(out->data);
    int wrong = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t i = 0; i < hw; ++i)
          for (int64_t l = 0; l < block; ++l) {
            const int64_t ch = g * block + l;
            const float want = ch < c ? x[(n * c + ch) * hw + i] : 0.f;
            wrong += y[((n * groups + g) * hw + i) * block + l] != want ? 1 : 0;
          }
    EXPECT_EQ(wrong, 0) << "block " << block;
    auto back =
        kernels::make_floorline_conversion({to->get(), true, 0, out->data}, {plain.get(), false, 0, nullptr});
    ASSERT_TRUE(back.ok()) << back.error().message;
    (*back)->run();
    const auto again = (*back)->port(true, 0);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->layout, "plain");
    ASSERT_EQ(again->bytes, 2 * c * hw * 4);
    EXPECT_EQ(std::memcmp(again->data, x, static_cast<size_t>(again->bytes)), 0) << "block " << block;
  }
  auto same =
      kernels::make_floorline_conversion({plain.get(), false, 0, x}, {plain.get(), false, 0, nullptr});
  ASSERT_FALSE(same.ok());
  EXPECT_EQ(same.error().code, Disposition::kUnsupported);
}

TEST(DataKernels, BertAndVitSoftmaxMatchTheReference) {
  const Seen bert = verify_own(zoo_layers("bert_base_encoder", {"Softmax"}), "softmax");
  EXPECT_EQ(bert.keys_with_own, (std::set<std::string>{"Softmax|x=12x128x128|axis=2|f32"}));
  EXPECT_EQ(bert.keys_with_onednn, bert.keys_with_own);
  EXPECT_EQ(bert.verified, 1);
  const Seen vit = verify_own(zoo_layers("vit_b_16", {"Softmax"}), "softmax");
  EXPECT_GE(vit.verified, 1);
  const Seen swin = verify_own(zoo_layers("swin_t", {"Softmax"}), "softmax");
  EXPECT_TRUE(swin.keys_with_own.count("Softmax|x=64x3x49x49|axis=3|f32"));
}

// Rows of every length around the vector loops' steps (8 and 16 floats; the tail of a row of 8 or
// more is its last 8, the lanes already summed masked out; a Softmax row of at most 256 elements in
// the AVX-512 build, 9 to 64 in the AVX2 one, is one pass in registers), Softmax and LogSoftmax, at
// 1 and 2 threads: the failures (at most 100), counted with `report` called on each.
int softmax_tail_failures(const std::function<void(const std::string&)>& report) {
  int failures = 0;
  const int saved = kernels::floorline_threads();
  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);
    for (const int64_t n :
         {1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 47, 48, 49, 63, 64, 65, 128, 197, 256, 257})
      for (const char* op : {"Softmax", "LogSoftmax"}) {
        kernels::CaseSpec spec;
        spec.problem.kind = *kind_from_name(op);
        spec.problem.op = op;
        spec.problem.key = fmt::format("{} 3x5x{}", op, n);
        spec.problem.inputs = {{"x", {3, 5, n}}};
        spec.problem.outputs = {{"y", {3, 5, n}}};
        spec.problem.ints = {{"axis", {2}}};
        spec.variant.backend = "floorline";
        spec.variant.algorithm = op == std::string("Softmax") ? "softmax" : "log_softmax";
        spec.variant.dtype = DType::kF32;
        auto k = kernels::make_floorline_kernel(spec);
        const Status v = k.ok() ? (*k)->verify() : Status(k.error());
        if (!v.ok()) {
          ++failures;
          report(fmt::format("{} at {} thread(s): {}", spec.problem.key, threads, v.error().message));
        }
      }
  }
  kernels::set_floorline_threads(saved);
  return std::min(failures, 100);
}

// In this process's build, and under an AVX2 cap in a fresh process (the death-test style runs the
// binary again), where an AVX-512 CPU runs the AVX2 build's own row loops.
TEST(DataKernels, SoftmaxRowsOfEveryTailMatchTheReference) {
  EXPECT_EQ(softmax_tail_failures([](const std::string& what) { ADD_FAILURE() << what; }), 0);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("FLOORLINE_MAX_CPU_ISA", "avx2", 1);
        std::exit(softmax_tail_failures(
            [](const std::string& what) { std::fprintf(stderr, "%s\n", what.c_str()); }));
      },
      testing::ExitedWithCode(0), "");
}

// The softmax loops run the build the CPU and the ISA cap allow: under an avx2 cap never the AVX-512
// one, and verified there. Each EXPECT_EXIT is a fresh process (the threadsafe style runs the test
// binary again), so the build is picked there, at the first softmax, under that process's cap.
int softmax_build_under(const char* cap) {
  if (cap)
    setenv("FLOORLINE_MAX_CPU_ISA", cap, 1);
  else
    unsetenv("FLOORLINE_MAX_CPU_ISA");
  const Seen bert = verify_own(zoo_layers("bert_base_encoder", {"Softmax"}), "softmax");
  if (bert.verified != 1) return 9;
  return static_cast<int>(kernels::floorline_softmax_target());
}

TEST(DataKernels, SoftmaxRunsTheBuildTheIsaCapAllows) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
  const int uncapped = static_cast<int>(avx512 ? KernelTarget::kAvx512
                                        : avx2 ? KernelTarget::kAvx2
                                               : KernelTarget::kBaseline);
  const int at_avx2 = static_cast<int>(avx2 ? KernelTarget::kAvx2 : KernelTarget::kBaseline);
  EXPECT_EXIT(std::exit(softmax_build_under(nullptr)), testing::ExitedWithCode(uncapped), "");
  EXPECT_EXIT(std::exit(softmax_build_under("avx2")), testing::ExitedWithCode(at_avx2), "");
  EXPECT_EXIT(std::exit(softmax_build_under("avx")), testing::ExitedWithCode(0), "");
}

// mnasnet's x.mean([2, 3]): the rows of 49 reduced by our reduce beside oneDNN's reduction (the
// bound check at 2 threads named oneDNN's 220 µs against ONNX Runtime's 15.5 µs node).
TEST(DataKernels, MnasnetReduceMeanIsARowReductionBesideOnednn) {
  const Seen mnas = verify_own(zoo_layers("mnasnet1_0", {"ReduceMean"}), "reduce");
  EXPECT_EQ(mnas.keys_with_own, (std::set<std::string>{"ReduceMean|x=1x1280x7x7|axes=2,3|keepdims=0|f32"}));
  EXPECT_EQ(mnas.keys_with_onednn, mnas.keys_with_own);
  EXPECT_EQ(mnas.verified, 1);
  // Every reduce kind over leading, middle and trailing adjacent axes, keepdims or not; axes that
  // are not adjacent are not ours.
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"})
    for (const auto& [axes, kept] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{0}, {1, 6, 5, 7}}, {{1, 2}, {3, 1, 1, 7}}, {{2, 3}, {3, 6, 1, 1}}, {{3}, {3, 6, 5, 1}}}) {
      kernels::CaseSpec spec;
      spec.problem.kind = *kind_from_name(op);
      spec.problem.op = op;
      spec.problem.key = op;
      spec.problem.inputs = {{"x", {3, 6, 5, 7}}};
      spec.problem.outputs = {{"y", kept}};
      spec.problem.ints["axes"] = axes;
      spec.variant.dtype = DType::kF32;
      auto k = kernels::make_floorline_kernel(spec);
      ASSERT_TRUE(k.ok()) << op << ": " << k.error().message;
      const Status s = (*k)->verify();
      EXPECT_TRUE(s.ok()) << op << " axes " << axes.front() << ": " << (s.ok() ? "" : s.error().message);
    }
  kernels::CaseSpec apart;
  apart.problem.kind = LayerKind::kReduceSum;
  apart.problem.op = "ReduceSum";
  apart.problem.inputs = {{"x", {3, 6, 5, 7}}};
  apart.problem.outputs = {{"y", {1, 6, 1, 7}}};
  apart.problem.ints["axes"] = {0, 2};
  apart.variant.dtype = DType::kF32;
  auto k = kernels::make_floorline_kernel(apart);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  EXPECT_NE(k.error().message.find("not adjacent"), std::string::npos) << k.error().message;
}

// Add, Sub, Mul, Div with broadcasting: every one of ssdlite's (the per-channel normalization
// 3x320x320 − 3x1x1 among them, which oneDNN 2.6 runs with its reference kernel) and of
// mobilenet_v3_large's (the squeeze-excitation Mul 1xCxHxW · 1xCx1x1) verified against the
// reference, at one thread and at two; and every broadcast form on a small shape.
TEST(DataKernels, BinaryOpsBroadcastAsTheReferenceDoes) {
  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);  // the pieces of a row split between the threads
    for (const char* model : {"ssdlite320_mobilenet_v3_large", "mobilenet_v3_large"}) {
      const Seen s = verify_own(zoo_layers(model, {"Add", "Sub", "Mul", "Div"}), "binary");
      EXPECT_GE(s.verified, 5) << model;
      EXPECT_EQ(s.own_cases, s.verified) << model;  // every case of ours, its blocked forms too
    }
  }
  kernels::set_floorline_threads(1);
  const Seen ssd = verify_own(zoo_layers("ssdlite320_mobilenet_v3_large", {"Sub", "Div"}), "binary");
  EXPECT_TRUE(ssd.keys_with_own.count("Sub|a=3x320x320|b=3x1x1|f32"))
      << fmt::format("{}", fmt::join(ssd.keys_with_own, " "));
  const std::vector<std::pair<mp::Shape, mp::Shape>> forms = {
      {{2, 3, 4, 5}, {2, 3, 4, 5}},  // same shape: one row
      {{2, 3, 4, 5}, {3, 1, 1}},     // per channel
      {{2, 3, 4, 5}, {5}},           // along the last axis (a bias)
      {{2, 3, 4, 5}, {2, 1, 4, 1}},  // alternating
      {{1, 3, 1, 5}, {2, 1, 4, 1}},  // both broadcast
      {{2, 3, 4, 5}, {}},            // a scalar
      {{1}, {1}},                    // one element
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    for (const auto& [a, b] : forms)
      for (const bool swap : {false, true}) {
        kernels::CaseSpec spec;
        spec.problem.kind = *kind_from_name(op);
        spec.problem.op = op;
        spec.problem.key = op;
        const mp::Shape& x = swap ? b : a;
        const mp::Shape& z = swap ? a : b;
        mp::Shape y(std::max(x.size(), z.size()), 1);
        for (size_t k = 0; k < y.size(); ++k) {
          const int64_t xd = k < x.size() ? x[x.size() - 1 - k] : 1,
                        zd = k < z.size() ? z[z.size() - 1 - k] : 1;
          y[y.size() - 1 - k] = std::max(xd, zd);
        }
        spec.problem.inputs = {{"a", x}, {"b", z}};
        spec.problem.outputs = {{"y", y}};
        spec.variant.dtype = DType::kF32;
        auto k = kernels::make_floorline_kernel(spec);
        ASSERT_TRUE(k.ok()) << op << ": " << k.error().message;
        const Status st = (*k)->verify();
        EXPECT_TRUE(st.ok()) << op << " " << fmt::format("{} and {}", fmt::join(x, "x"), fmt::join(z, "x"))
                             << ": " << (st.ok() ? "" : st.error().message);
      }
  // Shapes that do not broadcast are not ours.
  kernels::CaseSpec bad;
  bad.problem.kind = LayerKind::kAdd;
  bad.problem.op = "Add";
  bad.problem.inputs = {{"a", {2, 3}}, {"b", {4}}};
  bad.problem.outputs = {{"y", {2, 3}}};
  bad.variant.dtype = DType::kF32;
  auto k = kernels::make_floorline_kernel(bad);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
}

// Expand and Tile as rows of copies: Llama's grouped-query K/V Expand (4 KV heads to 32 query
// heads), where ONNX Runtime's Expand beat the oneDNN backend's copy of the output (1.03 against
// 1.20 ms at 512 past tokens), planned beside it and verified exactly; and every broadcast and tile
// form on small shapes, at one thread and at two.
// A hand-made f32 case of one-input `op` from x to y, its attributes left to the caller.
kernels::CaseSpec form_spec(const char* op, const mp::Shape& x, const mp::Shape& y) {
  kernels::CaseSpec spec;
  spec.problem.kind = *kind_from_name(op);
  spec.problem.op = op;
  spec.problem.key = op;
  spec.problem.inputs = {{"x", x}};
  spec.problem.outputs = {{"y", y}};
  spec.variant.dtype = DType::kF32;
  return spec;
}

TEST(DataKernels, ExpandAndTileAreRowCopiesAsTheReferenceDefines) {
  mp::ProcessOptions o;
  o.dims = {{"sequence_length", {1}}, {"past_sequence_length", {512}}};
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/llm/llama_1b_decode.onnx", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (auto& m : *r) std::erase_if(m.layers, [](const mp::Layer& l) { return l.op_type != "Expand"; });
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].layers.size(), 44u);  // 22 layers, K and V
  const Seen s = verify_own(*r, "expand");
  const std::string kv = "Expand|x=1x4x1x513x64|shape=1,4,8,513,64|y=1x4x8x513x64|f32";
  EXPECT_TRUE(s.keys_with_own.count(kv)) << fmt::format("{}", fmt::join(s.keys_with_own, " "));
  EXPECT_TRUE(s.keys_with_onednn.count(kv));  // beside oneDNN's copy, not instead
  EXPECT_EQ(s.verified, 1);

  struct Form {
    const char* op;
    mp::Shape x, y;
  };
  const std::vector<Form> forms = {
      {"Expand", {1, 4, 1, 5, 3}, {2, 4, 8, 5, 3}},  // grouped-query heads, and a batch
      {"Expand", {3, 1}, {3, 70000}},                // along the last axis: fills, split in pieces
      {"Expand", {5}, {4, 3, 5}},                    // a lower rank
      {"Expand", {1, 1}, {1, 1}},                    // one element
      {"Expand", {2, 1, 3}, {2, 1, 3}},              // the identity
      {"Tile", {2, 3}, {4, 9}},                      // both dims
      {"Tile", {1, 3, 1}, {2, 3, 5}},                // dims of one repeated
      {"Tile", {2, 70000}, {2, 140000}},             // rows longer than a piece
  };
  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);
    for (const auto& f : forms) {
      const kernels::CaseSpec spec = form_spec(f.op, f.x, f.y);
      auto k = kernels::make_floorline_kernel(spec);
      ASSERT_TRUE(k.ok()) << f.op << ": " << k.error().message;
      EXPECT_EQ((*k)->implementation(),
                std::string("floorline ") + (f.op == std::string("Tile") ? "tile" : "expand"));
      const Status st = (*k)->verify();
      EXPECT_TRUE(st.ok()) << f.op << " " << fmt::format("{} to {}", fmt::join(f.x, "x"), fmt::join(f.y, "x"))
                           << ": " << (st.ok() ? "" : st.error().message);
    }
  }
  kernels::set_floorline_threads(1);
  // Shapes that neither broadcast nor tile are not ours.
  for (const Form& f :
       {Form{"Expand", {2, 3}, {2, 4}}, Form{"Tile", {2, 3}, {2, 4}}, Form{"Tile", {3}, {2, 3}}}) {
    auto k = kernels::make_floorline_kernel(form_spec(f.op, f.x, f.y));
    ASSERT_FALSE(k.ok()) << f.op;
    EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  }
}

// ViT's attention reshuffles (Transpose perm 1,0,2 of [197, B, 768] and [197, 12B, 64]) and its
// q/k/v Slices of [197, B, 2304]: runs of 768 or 64 contiguous floats, each a memcpy, planned beside
// oneDNN's reorder (which ONNX Runtime's row copies beat at batch 32 on the 2-core Zen 4 EPYC: the
// Transpose of [197, 32, 768] 1,095 us against the reorder's 1,520). Hand-made forms: steps, runs
// merged across dims, dims of 1; a transpose that moves the last axis (one element a run) is not ours.
TEST(DataKernels, VitTransposesAndSlicesAreCopiesOfRuns) {
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/vit_b_16.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (auto& m : *r)
    std::erase_if(m.layers,
                  [](const mp::Layer& l) { return l.op_type != "Transpose" && l.op_type != "Slice"; });
  const Seen s = verify_own(*r, "copy_runs");
  for (const std::string key :
       {"Transpose|x=197x1x768|perm=1,0,2|f32", "Transpose|x=197x12x64|perm=1,0,2|f32",
        "Slice|x=197x1x2304|starts=768|axes=2|steps=1|y=197x1x768|f32"}) {
    EXPECT_TRUE(s.keys_with_own.count(key))
        << key << " not in " << fmt::format("{}", fmt::join(s.keys_with_own, " "));
    EXPECT_TRUE(s.keys_with_onednn.count(key)) << key;  // beside oneDNN's reorder, not instead
  }
  EXPECT_GE(s.verified, 3);

  struct Form {
    const char* op;
    mp::Shape x, y;
    std::vector<int64_t> perm_or_starts, axes = {}, steps = {};
    int64_t runs = 0;         // copy_runs' pieces; 0: not runs
    const char* kernel = "";  // the kernel that runs it; "": none of Floorline's (the last axis moves)
  };
  const std::vector<Form> forms = {
      {"Transpose", {3, 5, 7, 32}, {5, 3, 7, 32}, {1, 0, 2, 3}, {}, {}, 15, "copy_runs"},  // 7 x 32 a run
      {"Transpose", {2, 3, 4, 16}, {3, 2, 4, 16}, {1, 0, 2, 3}, {}, {}, 6, "copy_runs"},
      {"Transpose", {4, 1, 40}, {1, 4, 40}, {1, 0, 2}, {}, {}, 1, "copy_runs"},    // a dim of 1: one run
      {"Slice", {4, 6, 40}, {4, 2, 40}, {3}, {1}, {}, 4, "copy_runs"},             // rows 3, 4 of each
      {"Slice", {4, 6, 40}, {2, 3, 40}, {-3, 1}, {0, 1}, {1, 2}, 6, "copy_runs"},  // a step along rows
      {"Slice", {4, 6, 40}, {4, 6, 20}, {20}, {2}, {}, 24, "copy_runs"},           // the last axis cut
      {"Transpose", {6, 40}, {40, 6}, {}, {}, {}, 0, ""},  // the default perm: dims reversed
      {"Transpose", {2, 5, 6, 7}, {2, 6, 7, 5}, {0, 2, 3, 1}, {}, {}, 0, ""},  // to NHWC
      {"Slice", {4, 6, 40}, {4, 6, 10}, {0}, {2}, {4}, 0, ""},                 // a step along the last
      // A hostile step whose product with the extent wraps: never read past x.
      {"Slice", {5, 17}, {4, 17}, {0}, {0}, {(int64_t{1} << 62) + 1}, 0, ""},
  };
  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);
    for (const auto& f : forms) {
      kernels::CaseSpec spec = form_spec(f.op, f.x, f.y);
      if (std::string(f.op) == "Transpose") {
        if (!f.perm_or_starts.empty()) spec.problem.ints["perm"] = f.perm_or_starts;
      } else {
        spec.problem.ints["starts"] = f.perm_or_starts;
        spec.problem.ints["axes"] = f.axes;
        if (!f.steps.empty()) spec.problem.ints["steps"] = f.steps;
      }
      const std::string form = fmt::format("{} {} to {}", f.op, fmt::join(f.x, "x"), fmt::join(f.y, "x"));
      EXPECT_EQ(kernels::copy_run_count(spec.problem), f.runs) << form;
      EXPECT_EQ(kernels::floorline_kernel_name(spec.problem), f.kernel) << form;
      auto k = kernels::make_floorline_kernel(spec);
      if (std::string(f.kernel).empty()) {
        ASSERT_FALSE(k.ok()) << form;
        EXPECT_EQ(k.error().code, Disposition::kUnsupported) << form;
        continue;
      }
      ASSERT_TRUE(k.ok()) << form << ": " << k.error().message;
      EXPECT_EQ((*k)->implementation(), std::string("floorline ") + f.kernel);
      const Status st = (*k)->verify();  // every element, exactly
      EXPECT_TRUE(st.ok()) << form << ": " << (st.ok() ? "" : st.error().message);
    }
  }
  kernels::set_floorline_threads(1);
}

// Inception-v3's Pads before its AveragePools (H and W by 1), planned on the plain layout and on the
// layouts oneDNN's convolutions write (pad@blocked16c, pad@blocked8c, pad@nhwc) beside oneDNN's
// reorder, every zoo case verified; the ports name the layout, so that the replay keeps a
// convolution's NHWC output through the Pad. Hand-made forms: every axis padded (plain), rows longer
// than a thread's piece, no pads at all, a blocked tensor whose channels are no multiple of the block
// (its padding lanes must come out 0); what is not ours is unsupported.
TEST(DataKernels, InceptionPadsRunOnTheConvolutionsLayouts) {
  const Seen s = verify_own(zoo_layers("inception_v3", {"Pad"}), "pad");
  const std::string key = "Pad|x=1x768x17x17|pads=0,0,1,1,0,0,1,1|mode=constant|f32";
  EXPECT_TRUE(s.keys_with_own.count(key)) << fmt::format("{}", fmt::join(s.keys_with_own, " "));
  EXPECT_TRUE(s.keys_with_onednn.count(key));  // beside oneDNN's reorder, not instead
  EXPECT_EQ(s.own_cases, 4 * static_cast<int>(s.keys_with_own.size()));  // plain and three layouts
  EXPECT_EQ(s.verified, s.own_cases);

  struct Form {
    mp::Shape x, y;
    std::vector<int64_t> pads;
    const char* algorithm;
    bool ours = true;
  };
  const std::vector<Form> forms = {
      {{1, 768, 17, 17}, {1, 768, 19, 19}, {0, 0, 1, 1, 0, 0, 1, 1}, "pad@nhwc"},
      {{2, 20, 5, 3}, {2, 20, 8, 4}, {0, 0, 2, 0, 0, 0, 1, 1}, "pad@blocked16c"},  // 20 = 16 + 4 lanes
      {{2, 20, 5, 3}, {2, 20, 8, 4}, {0, 0, 2, 0, 0, 0, 1, 1}, "pad@blocked8c"},
      {{2, 3, 4}, {5, 4, 7}, {1, 0, 2, 2, 1, 1}, "pad"},                    // every axis, the batch too
      {{2, 70000}, {3, 70010}, {1, 4, 0, 6}, "pad"},                        // rows longer than a piece
      {{1, 56, 56, 96}, {1, 56, 56, 96}, {0, 0, 0, 0, 0, 0, 0, 0}, "pad"},  // no pads: one copy
      {{1, 8, 5, 5}, {1, 8, 5, 5}, {0, 0, 0, 0, 0, 0, 0, 0}, "pad@nhwc"},
      {{1, 8, 5, 5}, {1, 10, 5, 5}, {0, 1, 0, 0, 0, 1, 0, 0}, "pad@nhwc", false},  // channels padded
      {{1, 8, 5, 5}, {1, 8, 5, 5}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "pad", false},  // pads miscounted
      {{1, 8, 5, 5}, {1, 8, 3, 5}, {0, 0, -1, 0, 0, 0, -1, 0}, "pad", false},      // a crop
      {{1, 8, 5, 5}, {1, 8, 9, 5}, {0, 0, 1, 0, 0, 0, 1, 0}, "pad", false},        // y not x + pads
  };
  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);
    for (const auto& f : forms) {
      kernels::CaseSpec spec = form_spec("Pad", f.x, f.y);
      spec.problem.ints["pads"] = f.pads;
      spec.problem.strings["mode"] = "constant";
      spec.variant.algorithm = f.algorithm;
      const std::string form =
          fmt::format("{} {} to {}", f.algorithm, fmt::join(f.x, "x"), fmt::join(f.y, "x"));
      auto k = kernels::make_floorline_kernel(spec);
      if (!f.ours) {
        ASSERT_FALSE(k.ok()) << form;
        EXPECT_EQ(k.error().code, Disposition::kUnsupported) << form;
        continue;
      }
      ASSERT_TRUE(k.ok()) << form << ": " << k.error().message;
      EXPECT_EQ((*k)->implementation(), "floorline pad");
      const Status st = (*k)->verify();  // every element, exactly; blocked padding lanes 0
      EXPECT_TRUE(st.ok()) << form << ": " << (st.ok() ? "" : st.error().message);
      if (std::string(f.algorithm) == "pad@nhwc" && f.x[2] > 1) {
        EXPECT_EQ((*k)->port(false, 0)->layout, kernels::channels_last_layout(f.x)) << form;
        EXPECT_EQ((*k)->port(true, 0)->layout, kernels::channels_last_layout(f.y)) << form;
      }
    }
  }
  kernels::set_floorline_threads(1);
  kernels::CaseSpec reflect = form_spec("Pad", {1, 2, 3, 3}, {1, 2, 5, 5});
  reflect.problem.ints["pads"] = {0, 0, 1, 1, 0, 0, 1, 1};
  reflect.problem.strings["mode"] = "reflect";
  auto k = kernels::make_floorline_kernel(reflect);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
}

// ConvNeXt's Transposes to NHWC before each LayerNorm and back after the MLP, with their NCHW side
// held channels-last (transpose@nhwc): the same bytes, a copy, planned beside oneDNN's reorder (a
// real transpose) and verified on every zoo case; the NCHW side's port is acdb, the other plain.
// Any other Transpose, or one whose NCHW side has one pixel, is not this.
TEST(DataKernels, ConvnextTransposesAreCopiesWithTheirNchwSideChannelsLast) {
  auto models = zoo_layers("convnext_tiny", {"Transpose"});
  // Without the pixels ([1, 768, 1, 1] before the classifier) copy_runs runs it (plain order already).
  for (auto& m : models)
    std::erase_if(m.layers, [](const mp::Layer& l) {
      const auto& x = l.config.inputs.at(0).shape;
      return std::count_if(x.begin() + 1, x.end(), [](int64_t d) { return d > 1; }) < 2;
    });
  const Seen s = verify_own(models, "transpose");
  for (const std::string key :
       {"Transpose|x=1x96x56x56|perm=0,2,3,1|f32", "Transpose|x=1x56x56x96|perm=0,3,1,2|f32"}) {
    EXPECT_TRUE(s.keys_with_own.count(key))
        << key << " not in " << fmt::format("{}", fmt::join(s.keys_with_own, " "));
    EXPECT_TRUE(s.keys_with_onednn.count(key)) << key;
  }
  EXPECT_EQ(s.verified, s.own_cases);
  EXPECT_GE(s.verified, 8);  // 4 stages, both ways

  struct Form {
    mp::Shape x, y;
    std::vector<int64_t> perm;
    const char* in_layout;  // "": not ours
    const char* out_layout;
  };
  const std::vector<Form> forms = {
      {{2, 5, 3, 4}, {2, 3, 4, 5}, {0, 2, 3, 1}, "f32 acdb 2x5x3x4", "plain"},
      {{2, 3, 4, 5}, {2, 5, 3, 4}, {0, 3, 1, 2}, "plain", "f32 acdb 2x5x3x4"},
      {{2, 5, 1, 1}, {2, 1, 1, 5}, {0, 2, 3, 1}, "", ""},           // no pixels: the plain order already
      {{2, 5, 3, 4}, {2, 3, 5, 4}, {0, 2, 1, 3}, "", ""},           // another perm
      {{2, 5, 3, 4, 2}, {2, 3, 4, 2, 5}, {0, 2, 3, 4, 1}, "", ""},  // 5-D
  };
  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);
    for (const auto& f : forms) {
      kernels::CaseSpec spec = form_spec("Transpose", f.x, f.y);
      spec.problem.ints["perm"] = f.perm;
      spec.variant.algorithm = "transpose@nhwc";
      const std::string form = fmt::format("{} by {}", fmt::join(f.x, "x"), fmt::join(f.perm, ","));
      auto k = kernels::make_floorline_kernel(spec);
      if (std::string(f.in_layout).empty()) {
        ASSERT_FALSE(k.ok()) << form;
        EXPECT_EQ(k.error().code, Disposition::kUnsupported) << form;
        continue;
      }
      ASSERT_TRUE(k.ok()) << form << ": " << k.error().message;
      EXPECT_EQ((*k)->port(false, 0)->layout, f.in_layout) << form;
      EXPECT_EQ((*k)->port(true, 0)->layout, f.out_layout) << form;
      const Status st = (*k)->verify();
      EXPECT_TRUE(st.ok()) << form << ": " << (st.ok() ? "" : st.error().message);
    }
  }
  kernels::set_floorline_threads(1);
}

// EfficientNet's SiLUs on their own (a Sigmoid and its Mul by the Sigmoid's input, fused: post-op
// MulInput) are one pass of Floorline's silu, planned beside oneDNN's swish (its eltwise with that
// post-op), both verified against the reference on every zoo case. Hand-made: lengths with tails of
// every size below the vector width, inputs past the clamp (verify() draws them from [-100, 100)), at
// one thread and at two; a Sigmoid alone, or with another post-op, is not silu's.
TEST(DataKernels, EfficientnetSilusAreOnePassBesideOnednnSwish) {
  const auto models = zoo_layers("efficientnet_b0", {"Sigmoid", "Mul"});
  const Plan plan = make_plan(models, {find_backend("onednn"), find_backend("floorline")}, PlanOptions{});
  std::set<std::string> own, onednn;
  int verified = 0;
  for (const auto& c : plan.cases) {
    if (c.status || c.spec.variant.fusion != "MulInput" || !c.spec.feeds.empty()) continue;
    EXPECT_EQ(c.spec.problem.kind, LayerKind::kSigmoid) << c.spec.name;
    (c.spec.variant.backend == "floorline" ? own : onednn).insert(c.spec.problem.key);
    if (c.spec.variant.backend == "floorline") {
      EXPECT_EQ(c.spec.variant.algorithm, "silu");
    }
    auto k = c.spec.variant.backend == "floorline" ? kernels::make_floorline_kernel(c.spec)
                                                   : find_backend("onednn")->factory()(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    verified += v.ok();
  }
  const std::string stem = "Sigmoid|x=1x32x112x112|f32";
  EXPECT_TRUE(own.count(stem)) << fmt::format("{}", fmt::join(own, " "));
  EXPECT_TRUE(onednn.count(stem));
  EXPECT_EQ(own, onednn);
  EXPECT_GE(own.size(), 10u);
  EXPECT_EQ(verified, static_cast<int>(own.size() + onednn.size()));

  for (const int threads : {1, 2}) {
    kernels::set_floorline_threads(threads);
    for (const int64_t n : {1, 7, 8, 15, 16, 17, 31, 33, 40000}) {
      kernels::CaseSpec spec = form_spec("Sigmoid", {1, n}, {1, n});
      spec.problem.post_ops = {kernels::PostOp{"MulInput"}};
      spec.variant.algorithm = "silu";
      auto k = kernels::make_floorline_kernel(spec);
      ASSERT_TRUE(k.ok()) << n << ": " << k.error().message;
      const Status st = (*k)->verify();
      EXPECT_TRUE(st.ok()) << n << " at " << threads << ": " << (st.ok() ? "" : st.error().message);
    }
  }
  kernels::set_floorline_threads(1);
  kernels::CaseSpec alone = form_spec("Sigmoid", {1, 64}, {1, 64});
  EXPECT_EQ(kernels::floorline_kernel_name(alone.problem), "");
  alone.variant.algorithm = "silu";
  auto k = kernels::make_floorline_kernel(alone);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  alone.problem.post_ops = {kernels::PostOp{"Relu"}};
  k = kernels::make_floorline_kernel(alone);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
}

// DenseNet's pre-activation norm → relu is one case of oneDNN's normalization with its ReLU fused
// (post-op Relu on a BatchNormalization head: fuse_norm_relu), planned on each layout variant and
// verified against the reference.
TEST(OnednnFusions, DensenetNormAndReluAreOneNormalizationPass) {
  const auto models = zoo_layers("densenet121", {"BatchNormalization", "Relu"});
  const Plan plan = make_plan(models, {find_backend("onednn")}, PlanOptions{});
  std::set<std::string> keys, algorithms;
  int verified = 0;
  for (const auto& c : plan.cases) {
    if (c.status || c.spec.variant.fusion != "Relu" || !c.spec.feeds.empty()) continue;
    EXPECT_EQ(c.spec.problem.kind, LayerKind::kBatchNormalization) << c.spec.name;
    keys.insert(c.spec.problem.key);
    algorithms.insert(c.spec.variant.algorithm.substr(0, c.spec.variant.algorithm.find(':')));
    if (verified >= 12) continue;  // a dozen built and verified: the rest are the same primitive
    auto k = find_backend("onednn")->factory()(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    verified += v.ok();
  }
  EXPECT_TRUE(keys.count("BatchNormalization|x=1x64x56x56|scale|b|input_mean|input_var|training_mode=0|f32"))
      << fmt::format("{}", fmt::join(keys, " "));
  EXPECT_GE(keys.size(), 50u);  // every dense layer's norm1 and norm2, the transitions' norms
  EXPECT_TRUE(algorithms.count("batch_normalization@channels_last"))
      << fmt::format("{}", fmt::join(algorithms, " "));
  EXPECT_EQ(verified, 12);
}

TEST(DataKernels, SsdliteIdentityResizeIsACopy) {
  const Seen s = verify_own(zoo_layers("ssdlite320_mobilenet_v3_large", {"Resize"}), "copy");
  const std::string key =
      "Resize|x=1x3x320x320|coordinate_transformation_mode=half_pixel|mode=linear|y=1x3x320x320|f32";
  EXPECT_EQ(s.keys_with_own, (std::set<std::string>{key}));
  EXPECT_TRUE(s.keys_with_onednn.count(key));
  EXPECT_EQ(s.verified, 1);
}

constexpr const char* kForms = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,5,7] a, float[2,3,7] b, float[2,1,7] c, float[1,4,6,6] img)
    => (float cat1, float cat2, float cat0, float sm1, float sm2, float lsm, float same, float up)
{
  cat1 = Concat <axis = 1> (a, b, c)
  cat2 = Concat <axis = -1> (a, a)
  cat0 = Concat <axis = 0> (a, a)
  sm1 = Softmax <axis = 1> (a)
  sm2 = Softmax <axis = -1> (a)
  lsm = LogSoftmax <axis = 1> (a)
  sc = Constant <value = float[4] {1, 1, 1, 1}> ()
  same = Resize <mode = "nearest"> (img, , sc)
  sc2 = Constant <value = float[4] {1, 1, 2, 2}> ()
  up = Resize <mode = "nearest"> (img, , sc2)
}
)onnx";

TEST(DataKernels, EveryAxisAndFormMatchesTheReference) {
  auto m = mp::process_model_text(kForms, "forms.onnx", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Plan plan = make_plan(*m, {find_backend("onednn"), find_backend("floorline")}, PlanOptions{});
  std::set<std::string> own;
  int verified = 0;
  for (const auto& c : plan.cases) {
    if (c.status || c.spec.variant.backend != "floorline") continue;
    own.insert(c.spec.problem.op + " " + c.spec.variant.algorithm);
    EXPECT_FALSE(c.spec.problem.op == "Resize" && c.spec.problem.outputs[0].shape[2] == 12)
        << "a real resize has no copy case";
    auto k = kernels::make_floorline_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status s = (*k)->verify();
    EXPECT_TRUE(s.ok()) << c.spec.name << ": " << (s.ok() ? "" : s.error().message);
    verified += s.ok();
  }
  EXPECT_EQ(own, (std::set<std::string>{"Concat concat", "Softmax softmax", "LogSoftmax log_softmax",
                                        "Resize copy"}));
  EXPECT_EQ(verified, 7);  // 3 concats, 2 softmaxes, 1 log-softmax, 1 identity resize
}

TEST(DataKernels, OnlyF32AndTheIdentityResize) {
  kernels::CaseSpec spec;
  spec.problem.kind = LayerKind::kResize;
  spec.problem.op = "Resize";
  spec.problem.key = "Resize";
  spec.problem.inputs = {{"x", {1, 3, 8, 8}}};
  spec.problem.outputs = {{"y", {1, 3, 16, 16}}};
  spec.problem.strings["mode"] = "nearest";
  spec.variant.backend = "floorline";
  spec.variant.algorithm = "copy";
  spec.variant.dtype = DType::kF32;
  auto k = kernels::make_floorline_kernel(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  spec.problem.outputs = {{"y", {1, 3, 8, 8}}};
  k = kernels::make_floorline_kernel(spec);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_TRUE((*k)->verify().ok());
  spec.variant.dtype = DType::kBF16;
  k = kernels::make_floorline_kernel(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.error().message.find("runs f32, not bf16"), std::string::npos) << k.error().message;
}

// sgemm_packed (gemm.cpp): Floorline's SGEMM over a B packed once, where AVX2 and FMA run (and
// the ISA cap allows); elsewhere it says so and skips.
bool packed_gemm_runs() {
  __builtin_cpu_init();
  return kernel_target() != KernelTarget::kBaseline && __builtin_cpu_supports("fma");
}

// Planned beside oneDNN for every Gemm and every MatMul with 2-D weights of three zoo models and
// verified on them: convnext_tiny's (M from 49 to 3,136), resnet18's classifier (transB, a C of N),
// bert_base_encoder's projections; bert's batched attention products are unsupported, with why.
TEST(OwnGemm, ZooProductsOverPackedWeightsMatchTheReference) {
  if (!packed_gemm_runs())
    GTEST_SKIP() << "sgemm_packed needs AVX2 and FMA, which this CPU (or the cap) has not";
  Seen convnext = verify_own(zoo_layers("convnext_tiny", {"MatMul"}), "sgemm_packed");
  EXPECT_GE(convnext.verified, 6);
  EXPECT_EQ(convnext.keys_with_own, convnext.keys_with_onednn);
  Seen resnet = verify_own(zoo_layers("resnet18", {"Gemm"}), "sgemm_packed");
  EXPECT_EQ(resnet.verified, 1);
  const auto bert = zoo_layers("bert_base_encoder", {"MatMul"});
  Seen projections = verify_own(bert, "sgemm_packed");
  EXPECT_GE(projections.verified, 2);
  const Plan plan = make_plan(bert, {find_backend("floorline")}, PlanOptions{});
  int batched = 0;
  for (const auto& c : plan.cases)
    if (c.status && c.reason.find("B must be 2-D") != std::string::npos) ++batched;
  EXPECT_GE(batched, 2);  // Q·Kᵀ and the attention · V
}

// The edges of the blocking on hand-made products, at 1 and 3 threads (the threads split panels,
// or 6-row blocks where there are few panels): M not a multiple of 6, N not of 16, K over one
// 256-row block, transB, a C of N, M under 6 with one panel.
TEST(OwnGemm, BlockingEdgesMatchTheReference) {
  if (!packed_gemm_runs())
    GTEST_SKIP() << "sgemm_packed needs AVX2 and FMA, which this CPU (or the cap) has not";
  struct Form {
    LayerKind kind;
    std::vector<int64_t> a, b, c, y;
    bool trans_b;
  };
  const std::vector<Form> forms = {
      {LayerKind::kMatMul, {2, 5, 37}, {37, 45}, {}, {2, 5, 45}, false},
      {LayerKind::kMatMul, {7, 300}, {300, 20}, {}, {7, 20}, false},
      {LayerKind::kMatMul, {61, 520}, {520, 33}, {}, {61, 33}, false},
      {LayerKind::kGemm, {13, 64}, {40, 64}, {40}, {13, 40}, true},
      {LayerKind::kGemm, {3, 17}, {17, 16}, {}, {3, 16}, false},
  };
  const int saved = kernels::floorline_threads();
  for (const int threads : {1, 3}) {
    kernels::set_floorline_threads(threads);
    for (const auto& f : forms) {
      kernels::CaseSpec spec;
      spec.problem.kind = f.kind;
      spec.problem.op = f.kind == LayerKind::kGemm ? "Gemm" : "MatMul";
      spec.problem.key = fmt::format("{} {}x{}", spec.problem.op, fmt::join(f.a, "x"), fmt::join(f.b, "x"));
      spec.problem.inputs = {{"a", f.a}, {"b", f.b}};
      if (!f.c.empty()) spec.problem.inputs.push_back({"c", f.c});
      spec.problem.outputs = {{"y", f.y}};
      if (f.kind == LayerKind::kGemm) {
        spec.problem.ints = {{"transA", {0}}, {"transB", {f.trans_b ? 1 : 0}}};
        spec.problem.floats = {{"alpha", {1.0}}, {"beta", {1.0}}};
      }
      spec.variant.backend = "floorline";
      spec.variant.algorithm = "sgemm_packed";
      spec.variant.dtype = DType::kF32;
      const auto k = verified_kernel(spec, threads);
      ASSERT_TRUE(k);
      EXPECT_FALSE(k->port(false, 1));  // B is a constant, packed once
    }
  }
  kernels::set_floorline_threads(saved);
  kernels::CaseSpec spec;  // transA: unsupported, and says why
  spec.problem.kind = LayerKind::kGemm;
  spec.problem.op = "Gemm";
  spec.problem.inputs = {{"a", {64, 13}}, {"b", {64, 40}}};
  spec.problem.outputs = {{"y", {13, 40}}};
  spec.problem.ints = {{"transA", {1}}, {"transB", {0}}};
  spec.problem.floats = {{"alpha", {1.0}}, {"beta", {1.0}}};
  spec.variant.backend = "floorline";
  spec.variant.dtype = DType::kF32;
  auto k = kernels::make_floorline_kernel(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  EXPECT_NE(k.error().message.find("transA"), std::string::npos) << k.error().message;
}

// The Winograd convolution (winograd.cpp), F(4x4, 3x3) and F(2x2, 3x3), where AVX2 and FMA run.
// resnet18's layers at batch 1: every 3x3 convolution with unit strides (64 to 512 channels, 56x56
// to 7x7) has both, unfused, fused with its Relu and fused with the basic block's residual Add and
// Relu, planned beside oneDNN; the unfused verified against the reference, and the fused of the 7x7
// map (EdgesMatchTheReference fuses the others'); its strided and 1x1 convolutions are unsupported,
// with why.
TEST(OwnWinograd, Resnet18ConvolutionsMatchTheReference) {
  if (!packed_gemm_runs())
    GTEST_SKIP() << "the Winograd convolution needs AVX2 and FMA, which this CPU (or the cap) has not";
  const Plan plan = make_plan(zoo_layers("resnet18", {"Conv", "Relu", "Add"}),
                              {find_backend("onednn"), find_backend("floorline")}, PlanOptions{});
  std::set<std::string> verified, relu_fused, sum_fused, onednn_keys;
  std::map<std::string, int> reasons;
  for (const auto& c : plan.cases) {
    if (c.spec.problem.kind != LayerKind::kConv || c.spec.variant.dtype != DType::kF32) continue;
    if (c.spec.variant.backend == "onednn") {
      if (!c.status) onednn_keys.insert(c.spec.problem.key);
      continue;
    }
    ASSERT_EQ(c.spec.variant.backend, "floorline") << c.spec.name;
    if (c.status) {
      EXPECT_EQ(*c.status, Disposition::kUnsupported) << c.spec.name;
      for (const char* why : {"a 3x3 kernel only", "unit strides", "fuses a Relu, a residual Add or both"})
        if (c.reason.find(why) != std::string::npos) ++reasons[why];
      continue;
    }
    const std::string what = c.spec.variant.algorithm + " " + c.spec.problem.key;
    if (!c.spec.problem.post_ops.empty()) {
      (c.spec.problem.post_ops.front().op == "Add" ? sum_fused : relu_fused).insert(what);
      if (c.spec.problem.key.find("x512x7x7") == std::string::npos) continue;
    }
    auto k = kernels::make_floorline_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    EXPECT_EQ((*k)->implementation(), "floorline " + c.spec.variant.algorithm);
    EXPECT_FALSE((*k)->port(false, 1));  // the weights are a constant, transformed once
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    if (v.ok() && c.spec.problem.post_ops.empty()) verified.insert(what);
  }
  // 4 configurations (64x56x56, 128x28x28, 256x14x14, 512x7x7), two algorithms each.
  EXPECT_EQ(verified.size(), 8u) << fmt::format("{}", fmt::join(verified, "\n"));
  EXPECT_EQ(relu_fused.size(), 8u) << fmt::format("{}", fmt::join(relu_fused, "\n"));
  // Conv + Add + Relu, the second convolution of every basic block: the same 4 configurations.
  EXPECT_EQ(sum_fused.size(), 8u) << fmt::format("{}", fmt::join(sum_fused, "\n"));
  for (const auto& v : verified) EXPECT_TRUE(onednn_keys.count(v.substr(v.find(' ') + 1))) << v;
  EXPECT_GE(reasons["a 3x3 kernel only"], 3);  // the 7x7 stem, the 1x1 downsamples
  EXPECT_GE(reasons["unit strides"], 3);       // the stride-2 3x3 convolutions
  EXPECT_EQ(reasons["fuses a Relu, a residual Add or both"], 0);
}

// conv_valid_taps (taps.cpp): DeepLabV3's ASPP convolutions (3 × 3 dilated by 12, 24 and 36 on a
// 33 × 33 map padded as much) are planned with it, unfused and with their Relu, and build (one
// verified); its
// other convolutions read the image with every tap for most outputs and are not planned with it. A
// hand-made one at 1 and 3 threads: two images, channel counts off the micro-kernel's 6 and the
// panels' 16, regions narrower than a panel (panels across rows, gathered) and a tap that reads
// nothing.
TEST(OwnValidTaps, DeeplabAsppAndHandMadeDilatedConvolutionsMatchTheReference) {
  if (!packed_gemm_runs())
    GTEST_SKIP() << "conv_valid_taps needs AVX2 and FMA, which this CPU (or the cap) has not";
  const Plan plan = make_plan(zoo_layers("deeplabv3_mobilenet_v3_large", {"Conv", "Relu"}),
                              {find_backend("floorline")}, PlanOptions{});
  std::set<std::string> dilations;
  int planned = 0;
  for (const auto& c : plan.cases) {
    if (c.spec.variant.algorithm != "conv_valid_taps") continue;
    ++planned;
    ASSERT_FALSE(c.status) << c.spec.name << ": " << c.reason;
    dilations.insert(fmt::format("{}", fmt::join(c.spec.problem.ints.at("dil"), ",")));
    auto k = kernels::make_floorline_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    EXPECT_EQ((*k)->implementation(), "floorline conv_valid_taps");
    // One verified (the reference's 1x960x33x33 dilated convolution takes 8 s): dilation 24 with
    // its Relu, whose taps' regions are rows 24 to 32 or 0 to 8, whole or 9 pixels wide.
    if (c.spec.problem.key.find("dil=24") == std::string::npos || c.spec.problem.post_ops.empty()) continue;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
  }
  EXPECT_EQ(planned, 6);  // three configurations, unfused and with the Relu
  EXPECT_EQ(dilations, (std::set<std::string>{"12,12", "24,24", "36,36"}));

  kernels::CaseSpec spec;
  spec.problem.kind = LayerKind::kConv;
  spec.problem.op = "Conv";
  spec.problem.key = "Conv dilated hand-made";
  spec.problem.inputs = {{"x", {2, 7, 9, 10}}, {"w", {13, 7, 3, 3}}, {"bias", {13}}};
  spec.problem.outputs = {{"y", {2, 13, 9, 10}}};
  spec.problem.ints = {
      {"kernel_shape", {3, 3}}, {"pads", {5, 6, 5, 6}}, {"strides", {1, 1}}, {"dil", {5, 6}}, {"group", {1}}};
  spec.problem.post_ops = {{"Relu"}};
  spec.variant.backend = "floorline";
  spec.variant.algorithm = "conv_valid_taps";
  spec.variant.dtype = DType::kF32;
  const int saved = kernels::floorline_threads();
  for (const int threads : {1, 3}) {
    kernels::set_floorline_threads(threads);
    auto k = kernels::make_floorline_kernel(spec);
    ASSERT_TRUE(k.ok()) << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << "at " << threads << " thread(s): " << (v.ok() ? "" : v.error().message);
  }
  kernels::set_floorline_threads(saved);
  // Pads of 1, dilation 1: every tap reads the image for most outputs.
  spec.problem.ints["pads"] = {1, 1, 1, 1};
  spec.problem.ints["dil"] = {1, 1};
  auto dense = kernels::make_floorline_kernel(spec);
  ASSERT_FALSE(dense.ok());
  EXPECT_EQ(dense.error().code, Disposition::kUnsupported);
  EXPECT_NE(dense.error().message.find("direct count"), std::string::npos) << dense.error().message;
}

// The edges on hand-made convolutions, at 1 and 3 threads, with a chunk budget small enough for
// several chunks: channels not a multiple of 8 (the lanes) nor 6 (U's blocks), maps not a multiple
// of the tile (partial tiles; and a map of whole tiles only, stored 8 tiles at a time), pads 0, 2
// and asymmetric, no bias, a fused Relu, a fused residual Add (with and without the Relu after it:
// into the output, which holds the summand), batch 3.
TEST(OwnWinograd, EdgesMatchTheReference) {
  if (!packed_gemm_runs())
    GTEST_SKIP() << "the Winograd convolution needs AVX2 and FMA, which this CPU (or the cap) has not";
  struct Form {
    int64_t n, c, k, h, w;
    std::vector<int64_t> pads;  // top, left, bottom, right
    bool bias, relu, sum = false;
  };
  const std::vector<Form> forms = {
      {3, 13, 21, 9, 11, {1, 1, 1, 1}, true, false},
      {1, 8, 16, 6, 6, {0, 0, 0, 0}, false, false},
      {2, 5, 7, 10, 7, {2, 0, 1, 2}, true, true},
      {1, 40, 30, 3, 3, {2, 2, 2, 2}, true, false},
      {2, 17, 50, 14, 14, {1, 1, 1, 1}, false, true},
      {2, 9, 12, 16, 16, {1, 1, 1, 1}, true, true},
      {2, 9, 12, 16, 16, {1, 1, 1, 1}, true, true, true},
      {3, 13, 21, 9, 11, {1, 1, 1, 1}, true, false, true},
      {1, 16, 8, 13, 16, {1, 1, 1, 1}, false, true, true},
      {2, 9, 12, 16, 16, {1, 1, 1, 1}, false, false, true},
  };
  const int saved = kernels::floorline_threads();
  const int64_t saved_chunk = kernels::winograd_chunk_bytes();
  kernels::set_winograd_chunk_bytes(64 << 10);  // 16 tiles a chunk for these channels
  for (const int threads : {1, 3}) {
    kernels::set_floorline_threads(threads);
    for (const auto& f : forms)
      for (const char* algorithm : {"winograd_f4x4_3x3", "winograd_f2x2_3x3"}) {
        kernels::CaseSpec spec;
        spec.problem.kind = LayerKind::kConv;
        spec.problem.op = "Conv";
        const int64_t ho = f.h + f.pads[0] + f.pads[2] - 2, wo = f.w + f.pads[1] + f.pads[3] - 2;
        spec.problem.key =
            fmt::format("Conv {}x{}x{}x{} -> {} pads {}", f.n, f.c, f.h, f.w, f.k, fmt::join(f.pads, ","));
        spec.problem.inputs = {{"x", {f.n, f.c, f.h, f.w}}, {"w", {f.k, f.c, 3, 3}}};
        if (f.bias) spec.problem.inputs.push_back({"bias", {f.k}});
        spec.problem.outputs = {{"y", {f.n, f.k, ho, wo}}};
        spec.problem.ints = {
            {"kernel_shape", {3, 3}}, {"pads", f.pads}, {"strides", {1, 1}}, {"dil", {1, 1}}, {"group", {1}}};
        if (f.sum) spec.problem.post_ops = {{"Add"}};
        if (f.relu) spec.problem.post_ops.push_back({"Relu"});
        spec.variant.backend = "floorline";
        spec.variant.algorithm = algorithm;
        spec.variant.dtype = DType::kF32;
        auto k = kernels::make_floorline_kernel(spec);
        ASSERT_TRUE(k.ok()) << spec.problem.key << ": " << k.error().message;
        const Status v = (*k)->verify();
        EXPECT_TRUE(v.ok()) << algorithm << " " << spec.problem.key << " at " << threads
                            << " thread(s): " << (v.ok() ? "" : v.error().message);
        // On a scratchpad another case left full of NaN (replay shares one per model): every
        // element it reads, the padded input's zeros included, is written first.
        const int64_t bytes = (*k)->workspace_bytes();
        ASSERT_GT(bytes, 0);
        kernels::HostBuffer scratch(static_cast<size_t>(bytes));
        std::fill_n(static_cast<float*>(scratch.data()), bytes / 4, std::numeric_limits<float>::quiet_NaN());
        ASSERT_TRUE((*k)->share_workspace(scratch.data()));
        const Status shared = (*k)->verify();
        EXPECT_TRUE(shared.ok()) << algorithm << " " << spec.problem.key << " on a shared scratchpad at "
                                 << threads << " thread(s): " << (shared.ok() ? "" : shared.error().message);
      }
  }
  kernels::set_floorline_threads(saved);
  kernels::set_winograd_chunk_bytes(saved_chunk);
}

// MatMulNBits over 4-bit weights (nbits.cpp), against the reference (reference.cpp): a decode
// step's GEMV rows (M ≤ 4) and the tiled product (M > 4, K over one 256-row panel), with and
// without zero points and a bias, block sizes 16, 32 and 128, 2 to 32 blocks, at 1 and 3 threads; and the
// same over the weights dequantized at load (matmul_nbits@f32_weights).
kernels::CaseSpec nbits_spec(std::vector<int64_t> a, int64_t n, int64_t block, bool zero_points, bool bias,
                             int64_t bits = 4) {
  const int64_t k = a.back(), blocks = k / block;
  kernels::CaseSpec spec;
  spec.problem.kind = LayerKind::kMatMulNBits;
  spec.problem.op = "MatMulNBits";
  spec.problem.key = fmt::format("MatMulNBits {} N={} block={}", fmt::join(a, "x"), n, block);
  std::vector<int64_t> y = a;
  y.back() = n;
  spec.problem.inputs = {{"a", a}, {"b", {n, blocks, block * bits / 8}}, {"scales", {n * blocks}}};
  if (zero_points) spec.problem.inputs.push_back({"zero_points", {n * ((blocks * bits + 7) / 8)}});
  if (bias) spec.problem.inputs.push_back({"bias", {n}});
  spec.problem.outputs = {{"y", y}};
  spec.problem.ints = {
      {"K", {k}}, {"N", {n}}, {"bits", {bits}}, {"block_size", {block}}, {"accuracy_level", {0}}};
  spec.variant.backend = "floorline";
  spec.variant.algorithm = "matmul_nbits";
  spec.variant.dtype = DType::kF32;
  return spec;
}

TEST(OwnNBits, GemvAndTiledProductsMatchTheReference) {
  if (!packed_gemm_runs())
    GTEST_SKIP() << "matmul_nbits needs AVX2 and FMA, which this CPU (or the cap) has not";
  const std::vector<kernels::CaseSpec> specs = {
      nbits_spec({1, 64}, 37, 32, true, false),
      nbits_spec({1, 1, 256}, 100, 16, false, true),
      nbits_spec({3, 128}, 20, 16, true, true),
      nbits_spec({2, 7, 384}, 33, 128, true, false),
      nbits_spec({13, 512}, 48, 32, false, true),
      // GEMVs over 19 blocks (the zero points 8 at a time, then 3 alone; an odd count of blocks
      // for the two totals) and over 32.
      nbits_spec({2, 304}, 21, 16, true, true),
      nbits_spec({4, 1024}, 19, 32, true, false),
      nbits_spec({1, 1, 608}, 9, 32, false, false),
  };
  const int saved = kernels::floorline_threads();
  for (const int threads : {1, 3}) {
    kernels::set_floorline_threads(threads);
    for (auto spec : specs)
      for (const char* algorithm : {"matmul_nbits", "matmul_nbits@f32_weights"}) {
        spec.variant.algorithm = algorithm;
        auto k = kernels::make_floorline_kernel(spec);
        ASSERT_TRUE(k.ok()) << spec.problem.key << ": " << k.error().message;
        EXPECT_EQ((*k)->implementation(), std::string("floorline ") + algorithm);
        const Status v = (*k)->verify();
        EXPECT_TRUE(v.ok()) << spec.problem.key << " " << algorithm << " at " << threads
                            << " thread(s): " << (v.ok() ? "" : v.error().message);
        EXPECT_FALSE((*k)->port(false, 1));  // B is a constant
      }
  }
  kernels::set_floorline_threads(saved);
  // 8-bit weights and blocks that do not divide K: unsupported, with why.
  auto eight = kernels::make_floorline_kernel(nbits_spec({1, 64}, 8, 32, false, false, 8));
  ASSERT_FALSE(eight.ok());
  EXPECT_EQ(eight.error().code, Disposition::kUnsupported);
  EXPECT_NE(eight.error().message.find("not 8-bit"), std::string::npos) << eight.error().message;
}

// The reference by hand: 16 weights in one block, bytes 0x98 (q = 8, 9, 8, 9, ...), the default
// zero point 8 and scale 0.5, so w = 0, 0.5, 0, 0.5, ...; A all ones: y = 8 · 0.5 + bias 1 = 5.
TEST(OwnNBits, TheReferenceDequantizesNibblesLowFirst) {
  const auto spec = nbits_spec({1, 16}, 1, 16, false, true);
  std::vector<kernels::HostTensor> in = {{{1, 16}, std::vector<float>(16, 1.f)},
                                         {{1, 1, 8}, std::vector<float>(8, static_cast<float>(0x98))},
                                         {{1}, {0.5f}},
                                         {{1}, {1.f}}};
  auto y = kernels::reference(spec.problem, in, {});
  ASSERT_TRUE(y.ok()) << y.error().message;
  ASSERT_EQ(y->size(), 1u);
  EXPECT_FLOAT_EQ((*y)[0].data.at(0), 5.f);
}

// Attention (attention.cpp): ViT's and BERT's chains (MatMul, Softmax, MatMul: the scale is on Q
// before) planned as one fused case of the floorline backend, its work the chain's, verified at 1
// and 2 threads; the other backends plan it unsupported. Hand-made forms at 1 and 3 threads: K
// transposed (packed) and not (read in place, its last panel packed), keys and V's columns off the
// panels' 16, a scale, biases broadcast per head, per query and per key, a decode step's few queries
// (no packing), and a block count that does not divide the queries.
TEST(OwnAttention, VitAndBertChainsAndHandMadeFormsMatchTheReference) {
  if (!packed_gemm_runs())
    GTEST_SKIP() << "attention needs AVX2 and FMA, which this CPU (or the cap) has not";
  int planned = 0;
  std::set<std::string> names;
  for (const char* model : {"vit_b_16", "bert_base_encoder"}) {
    const auto models = zoo_layers(model, {"MatMul", "Softmax", "Div", "Transpose"});
    const Plan plan = make_plan(models, {find_backend("floorline"), find_backend("onednn")}, PlanOptions{});
    for (const auto& c : plan.cases) {
      if (c.spec.variant.fusion.find("Softmax+MatMul") == std::string::npos) continue;
      if (c.spec.variant.backend != "floorline") {
        EXPECT_EQ(c.status, Disposition::kUnsupported) << c.spec.name;
        continue;
      }
      ++planned;
      names.insert(c.spec.variant.fusion);
      ASSERT_FALSE(c.status) << c.spec.name << ": " << c.reason;
      EXPECT_EQ(c.spec.variant.algorithm, "attention");
      // Two products of Sq·Sk·D multiply-adds, and the softmax's 5 per score.
      const auto& q = c.spec.problem.inputs[0].shape;
      const int64_t sk = c.spec.problem.inputs[1].shape.back(), heads = q[0], sq = q[1], d = q[2];
      EXPECT_EQ(c.work.flops, 4 * heads * sq * sk * d + 5 * heads * sq * sk) << c.spec.name;
      EXPECT_EQ(c.work.bytes, 4 * 4 * heads * sq * d) << c.spec.name;  // Q, K, V and O
      const int saved = kernels::floorline_threads();
      for (const int threads : {1, 2}) {
        kernels::set_floorline_threads(threads);
        auto k = verified_kernel(c.spec, threads);
        ASSERT_TRUE(k);
        EXPECT_EQ(k->implementation(), "attention:packed");
      }
      kernels::set_floorline_threads(saved);
    }
  }
  EXPECT_EQ(planned, 2);
  EXPECT_EQ(names, (std::set<std::string>{"Softmax+MatMul(12x197x64)", "Softmax+MatMul(12x128x64)"}));

  struct Form {
    std::vector<int64_t> lead;
    int64_t sq, sk, d, dv;
    bool tb;
    std::vector<std::vector<int64_t>> biases;
    double scale;
  };
  const std::vector<Form> forms = {
      {{2, 3}, 50, 37, 20, 24, true, {{1, 3, 50, 37}}, 0.25},        // Swin's relative bias, K transposed
      {{2, 3}, 50, 37, 20, 16, false, {{2, 1, 1, 37}, {50, 1}}, 1},  // a padding mask, a per-query bias
      {{4}, 3, 70, 32, 40, true, {}, 0.5},                           // decode: 3 stacked queries, no packing
      {{4}, 1, 33, 16, 16, false, {{1, 33}}, 1},                     // one query, K [D, Sk]
      {{4}, 1, 33, 16, 16, false, {}, 1},
      {{4}, 1, 33, 16, 16, true, {{1, 33}}, 1},
      {{1, 1}, 97, 64, 64, 64, false, {}, 1},  // every panel in place
  };
  for (const auto& f : forms) {
    kernels::CaseSpec spec;
    auto dims = [&](int64_t a, int64_t b) {
      std::vector<int64_t> s = f.lead;
      s.push_back(a);
      s.push_back(b);
      return s;
    };
    spec.problem.kind = LayerKind::kMatMul;
    spec.problem.op = "MatMul";
    spec.problem.key = fmt::format("attention hand-made sq={} sk={} d={} dv={}", f.sq, f.sk, f.d, f.dv);
    spec.problem.inputs = {{"a", dims(f.sq, f.d)}, {"b", f.tb ? dims(f.sk, f.d) : dims(f.d, f.sk)}};
    spec.problem.outputs = {{"y", dims(f.sq, f.sk)}};
    if (f.tb) spec.problem.ints["transB"] = {1};
    if (f.scale != 1) spec.problem.post_ops.push_back({"Scale", f.scale});
    for (const auto& b : f.biases) spec.problem.post_ops.push_back({"AttentionBias", 0, 0, b});
    spec.problem.post_ops.push_back({"Softmax"});
    spec.problem.post_ops.push_back({"MatMul", 0, 0, dims(f.sk, f.dv)});
    spec.variant.backend = "floorline";
    spec.variant.algorithm = "attention";
    spec.variant.dtype = DType::kF32;
    const int saved = kernels::floorline_threads();
    for (const int threads : {1, 3}) {
      kernels::set_floorline_threads(threads);
      auto k = verified_kernel(spec, threads);
      ASSERT_TRUE(k);
      EXPECT_EQ(k->implementation(), f.sq < 8 ? "attention:rows" : "attention:packed");
      // Wired to outside buffers (the replay's): input 2 is the first bias (or V), output 0 O of
      // [..., Sq, Dv].
      const auto o = k->port(true, 0);
      ASSERT_TRUE(o);
      EXPECT_EQ(o->bytes, 4 * kernels::elements(dims(f.sq, f.dv)));
      const auto v = k->port(false, 2 + f.biases.size());
      ASSERT_TRUE(v);
      EXPECT_EQ(v->bytes, 4 * kernels::elements(dims(f.sk, f.dv)));
      EXPECT_FALSE(k->port(false, 3 + f.biases.size()));
    }
    kernels::set_floorline_threads(saved);
  }
  // A bias that does not broadcast to the scores, and a chain without the product by V.
  kernels::CaseSpec bad;
  bad.problem.kind = LayerKind::kMatMul;
  bad.problem.op = "MatMul";
  bad.problem.inputs = {{"a", {2, 5, 4}}, {"b", {2, 4, 6}}};
  bad.problem.outputs = {{"y", {2, 5, 6}}};
  bad.problem.post_ops = {{"AttentionBias", 0, 0, {3, 1, 6}}, {"Softmax"}, {"MatMul", 0, 0, {2, 6, 4}}};
  bad.variant.backend = "floorline";
  bad.variant.algorithm = "attention";
  bad.variant.dtype = DType::kF32;
  auto k = kernels::make_floorline_kernel(bad);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  EXPECT_NE(k.error().message.find("does not broadcast"), std::string::npos) << k.error().message;
  bad.problem.post_ops = {{"Softmax"}};
  EXPECT_FALSE(kernels::make_floorline_kernel(bad).ok());
  // Nine biases: more than its row function holds.
  bad.problem.post_ops.clear();
  for (int b = 0; b < 9; ++b) bad.problem.post_ops.push_back({"AttentionBias", 0, 0, {1, 6}});
  bad.problem.post_ops.push_back({"Softmax"});
  bad.problem.post_ops.push_back({"MatMul", 0, 0, {2, 6, 4}});
  auto many = kernels::make_floorline_kernel(bad);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().code, Disposition::kUnsupported);
  EXPECT_NE(many.error().message.find("8 at most"), std::string::npos) << many.error().message;
}

}  // namespace
}  // namespace floorline::gen
