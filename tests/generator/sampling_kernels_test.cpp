// RoiAlign, GridSample and ScatterElements, and GatherND with batch_dims. Their oracle
// against values worked out by hand (bilinear sampling of a linear ramp is exact; an identity grid
// reproduces the image; the ScatterElements examples of the ONNX operator documentation), then
// Floorline's own CPU kernels (the floorline backend) against the reference on the
// configurations of the models that have these ops: torchvision's Faster R-CNN (mobilenet_v3
// 320 FPN: 256 channels, 7 × 7, sampling_ratio 2, its two FPN levels at stride 16 and 32, the merge
// of the levels as a ScatterElements) and Mask R-CNN (14 × 14 masks), RAFT's correlation lookups
// (bilinear, zeros, align_corners 1 on [N·H·W, 1, h, w] volumes), with the box count from
// --max-detections.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "floorline/generator/plan.hpp"
#include "floorline/kernels/floorline.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::gen {
namespace {

using kernels::HostTensor;
using kernels::Problem;

Problem problem(LayerKind kind, std::vector<kernels::Operand> in, std::vector<kernels::Operand> out) {
  Problem p;
  p.kind = kind;
  p.op = std::string(kind_name(kind));
  p.key = p.op;
  p.inputs = std::move(in);
  p.outputs = std::move(out);
  return p;
}

std::vector<float> run_reference(const Problem& p, const std::vector<HostTensor>& in) {
  auto r = kernels::reference(p, in, {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() && !r->empty() ? (*r)[0].data : std::vector<float>{};
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t e = 0; e < got.size(); ++e) EXPECT_NEAR(got[e], want[e], 1e-4) << "element " << e;
}

// X[y][x] = x + 10 y on a 10 × 10 map.
HostTensor ramp(int64_t h, int64_t w) {
  HostTensor x{{1, 1, h, w}, {}};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t q = 0; q < w; ++q) x.data.push_back(static_cast<float>(q + 10 * y));
  return x;
}

TEST(SamplingReference, RoiAlignAveragesBilinearSamplesOfTheBins) {
  // Box [2, 2, 6, 6], 2 × 2 bins. half_pixel: the box starts at 1.5, bins 2 wide, centres 2.5 and
  // 4.5; a linear ramp's bilinear samples average to the value at the bin centre.
  Problem p = problem(LayerKind::kRoiAlign, {{"x", {1, 1, 10, 10}}, {"rois", {1, 4}}, {"batch_indices", {1}}},
                      {{"y", {1, 1, 2, 2}}});
  p.ints = {{"output_height", {2}}, {"output_width", {2}}, {"sampling_ratio", {2}}};
  p.floats = {{"spatial_scale", {1.0}}};
  p.strings = {{"mode", "avg"}, {"coordinate_transformation_mode", "half_pixel"}};
  const std::vector<HostTensor> in = {ramp(10, 10), HostTensor{{1, 4}, {2, 2, 6, 6}}, HostTensor{{1}, {0}}};
  expect_near(run_reference(p, in), {27.5f, 29.5f, 47.5f, 49.5f});
  // output_half_pixel (opset 10, torchvision's aligned=False): no shift, centres 3 and 5.
  p.strings["coordinate_transformation_mode"] = "output_half_pixel";
  expect_near(run_reference(p, in), {33, 35, 53, 55});
  // sampling_ratio 0: ⌈4 / 2⌉ = 2 samples per axis, the same; spatial_scale 0.5 on a box twice as big.
  p.ints["sampling_ratio"] = {0};
  p.floats["spatial_scale"] = {0.5};
  expect_near(run_reference(p, {in[0], HostTensor{{1, 4}, {4, 4, 12, 12}}, in[2]}), {33, 35, 53, 55});
  // Max mode: per sample the largest weighted corner; at integer sample points (box [1, 1, 5, 5],
  // ratio 1, output_half_pixel: samples at 2 and 4) the corner of weight 1, so the value there.
  p.strings["mode"] = "max";
  p.ints["sampling_ratio"] = {1};
  p.floats["spatial_scale"] = {1.0};
  expect_near(run_reference(p, {in[0], HostTensor{{1, 4}, {1, 1, 5, 5}}, in[2]}), {22, 24, 42, 44});
  // A box whose samples all lie beyond the map (y, x > 10) is 0.
  p.strings["mode"] = "avg";
  expect_near(run_reference(p, {in[0], HostTensor{{1, 4}, {12, 12, 16, 16}}, in[2]}), {0, 0, 0, 0});
}

TEST(SamplingReference, GridSampleIdentityGridAndPaddingModes) {
  // align_corners 1: grid x = -1 + 2 q / (W - 1) lands on pixel q; every mode reproduces X.
  const int64_t h = 3, w = 5;
  const HostTensor x = ramp(h, w);
  HostTensor grid{{1, h, w, 2}, {}};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t q = 0; q < w; ++q) {
      grid.data.push_back(-1.f + 2.f * static_cast<float>(q) / static_cast<float>(w - 1));
      grid.data.push_back(-1.f + 2.f * static_cast<float>(y) / static_cast<float>(h - 1));
    }
  Problem p =
      problem(LayerKind::kGridSample, {{"x", {1, 1, h, w}}, {"grid", {1, h, w, 2}}}, {{"y", {1, 1, h, w}}});
  p.ints = {{"align_corners", {1}}};
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    p.strings = {{"mode", mode}, {"padding_mode", "zeros"}};
    SCOPED_TRACE(mode);
    expect_near(run_reference(p, {x, grid}), x.data);
  }
  // One point at x = 1.5, y = 0 (the middle row): 1.25 · (W - 1) = 5, outside. zeros: 0; border:
  // the last column (4 + 10); reflection about 4: column 3 (3 + 10).
  Problem one =
      problem(LayerKind::kGridSample, {{"x", {1, 1, h, w}}, {"grid", {1, 1, 1, 2}}}, {{"y", {1, 1, 1, 1}}});
  one.ints = {{"align_corners", {1}}};
  const HostTensor g{{1, 1, 1, 2}, {1.5f, 0.f}};
  const std::vector<std::pair<const char*, float>> cases = {
      {"zeros", 0.f}, {"border", 14.f}, {"reflection", 13.f}};
  for (const auto& [pad, want] : cases) {
    one.strings = {{"mode", "bilinear"}, {"padding_mode", pad}};
    SCOPED_TRACE(pad);
    expect_near(run_reference(one, {x, g}), {want});
  }
  // align_corners 0: x = -1 is the left edge of pixel 0 (-0.5): half of pixel 0 with zeros padding.
  one.ints = {{"align_corners", {0}}};
  one.strings = {{"mode", "bilinear"}, {"padding_mode", "zeros"}};
  expect_near(run_reference(one, {x, HostTensor{{1, 1, 1, 2}, {-1.f, 0.f}}}), {0.5f * 10.f});
}

TEST(SamplingReference, ScatterElementsAsTheOnnxExamples) {
  // Operators.md ScatterElements, scatter_elements_with_axis: data [[1, 2, 3, 4, 5]], indices
  // [[1, 3]], updates [[1.1, 2.1]], axis 1 -> [[1, 1.1, 3, 2.1, 5]].
  Problem p = problem(LayerKind::kScatterElements, {{"x", {1, 5}}, {"indices", {1, 2}}, {"updates", {1, 2}}},
                      {{"y", {1, 5}}});
  p.ints = {{"axis", {1}}};
  p.strings = {{"reduction", "none"}};
  const HostTensor data{{1, 5}, {1, 2, 3, 4, 5}};
  const HostTensor upd{{1, 2}, {1.1f, 2.1f}};
  expect_near(run_reference(p, {data, HostTensor{{1, 2}, {1, 3}}, upd}), {1, 1.1f, 3, 2.1f, 5});
  // scatter_elements_with_negative_indices: [[1, -3]] -> [[1, 1.1, 2.1, 4, 5]].
  expect_near(run_reference(p, {data, HostTensor{{1, 2}, {1, -3}}, upd}), {1, 1.1f, 2.1f, 4, 5});
  // scatter_elements_with_duplicate_indices (reduction add): [[1, 1]] -> [[1, 5.2, 3, 4, 5]]; and
  // the same duplicates with none (the last wins), mul, max (opset 18) and min.
  const HostTensor dup{{1, 2}, {1, 1}};
  const std::vector<std::pair<const char*, float>> cases = {
      {"add", 2 + 1.1f + 2.1f}, {"none", 2.1f}, {"mul", 2 * 1.1f * 2.1f}, {"max", 2.1f}, {"min", 1.1f}};
  for (const auto& [red, want] : cases) {
    p.strings["reduction"] = red;
    SCOPED_TRACE(red);
    expect_near(run_reference(p, {data, dup, upd}), {1, want, 3, 4, 5});
  }
  // Operators.md scatter_elements_without_axis (axis 0): data 3 × 3 zeros, indices [[1, 0, 2],
  // [0, 2, 1]], updates [[1, 1.1, 1.2], [2, 2.1, 2.2]] -> [[2, 1.1, 0], [1, 0, 2.2], [0, 2.1, 1.2]].
  Problem q = problem(LayerKind::kScatterElements, {{"x", {3, 3}}, {"indices", {2, 3}}, {"updates", {2, 3}}},
                      {{"y", {3, 3}}});
  q.ints = {{"axis", {0}}};
  q.strings = {{"reduction", "none"}};
  expect_near(run_reference(
                  q, {HostTensor{{3, 3}, std::vector<float>(9, 0.f)}, HostTensor{{2, 3}, {1, 0, 2, 0, 2, 1}},
                      HostTensor{{2, 3}, {1, 1.1f, 1.2f, 2, 2.1f, 2.2f}}}),
              {2, 1.1f, 0, 1, 0, 2.2f, 0, 2.1f, 1.2f});
  EXPECT_FALSE(kernels::reference(p, {data, HostTensor{{1, 2}, {5, 0}}, upd}, {}).ok());  // out of range
}

// Every planned floorline case of `ops` built, verified and run again; returns the ops verified
// and the algorithms seen.
std::pair<std::set<std::string>, std::set<std::string>> verify_ops(const std::vector<mp::ModelIR>& models,
                                                                   const std::set<std::string>& ops) {
  const Plan plan = make_plan(models, {find_backend("floorline")}, PlanOptions{});
  std::set<std::string> verified, algorithms;
  for (const auto& c : plan.cases) {
    if (!ops.count(c.spec.problem.op)) continue;
    EXPECT_FALSE(c.status) << c.spec.name << ": " << c.reason;
    if (c.status) continue;
    algorithms.insert(c.spec.variant.algorithm);
    auto k = kernels::make_floorline_kernel(c.spec);
    EXPECT_TRUE(k.ok()) << c.spec.name << ": " << (k.ok() ? "" : k.error().message);
    if (!k.ok()) continue;
    EXPECT_EQ((*k)->implementation(), "floorline " + c.spec.variant.algorithm);
    const Status s = (*k)->verify();
    EXPECT_TRUE(s.ok()) << c.spec.name << ": " << (s.ok() ? "" : s.error().message);
    (*k)->run();
    if (s.ok()) verified.insert(c.spec.problem.op);
  }
  return {verified, algorithms};
}

size_t count_cases(const std::vector<mp::ModelIR>& models, const std::string& op) {
  const Plan plan = make_plan(models, {find_backend("floorline")}, PlanOptions{});
  size_t n = 0;
  for (const auto& c : plan.cases) n += c.spec.problem.op == op && !c.status;
  return n;
}

// torchvision fasterrcnn_mobilenet_v3_large_320_fpn's box head and maskrcnn_resnet50_fpn's mask
// head at --max-detections: MultiScaleRoIAlign (aligned=False: output_half_pixel) per FPN level on
// the boxes of that level, then the ONNX merge of the levels (ScatterElements along axis 0 into
// [R, 256, 7, 7]).
constexpr const char* kDetectionHeads = R"onnx(
<ir_version: 8, opset_import: ["" : 16]>
g (float[1,256,20,20] p16, float[1,256,10,10] p32, float[1,256,200,200] m4, float[1000,5] proposals,
   int64[1000] levels, float[100,256,7,7] merged, int64[100,256,7,7] order)
    => (float box16, float box32, float mask4, float all)
{
  ax0 = Constant <value = int64[1] {0}> ()
  ax1 = Constant <value = int64[1] {1}> ()
  s0 = Constant <value = int64[1] {0}> ()
  s1 = Constant <value = int64[1] {1}> ()
  s5 = Constant <value = int64[1] {5}> ()
  col = Slice (proposals, s0, s1, ax1)
  colv = Squeeze (col, ax1)
  bi = Cast <to = 7> (colv)
  rois = Slice (proposals, s1, s5, ax1)
  l0 = Constant <value = int64[1] {0}> ()
  hit = Equal (levels, l0)
  nz = NonZero (hit)
  idx = Squeeze (nz, ax0)
  lrois = Gather <axis = 0> (rois, idx)
  lbi = Gather <axis = 0> (bi, idx)
  box16 = RoiAlign <output_height = 7, output_width = 7, sampling_ratio = 2, spatial_scale = 0.0625,
                    coordinate_transformation_mode = "output_half_pixel"> (p16, lrois, lbi)
  box32 = RoiAlign <output_height = 7, output_width = 7, sampling_ratio = 2, spatial_scale = 0.03125,
                    coordinate_transformation_mode = "output_half_pixel"> (p32, lrois, lbi)
  mask4 = RoiAlign <output_height = 14, output_width = 14, sampling_ratio = 2, spatial_scale = 0.25,
                    coordinate_transformation_mode = "output_half_pixel"> (m4, lrois, lbi)
  all = ScatterElements <axis = 0> (merged, order, box16)
}
)onnx";

TEST(SamplingKernels, DetectionHeadRoiAlignAndLevelMergeMatchTheReference) {
  mp::ProcessOptions o;
  o.max_detections = 100;
  auto m = mp::process_model_text(kDetectionHeads, "heads.onnx", o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 1u);
  for (const auto& l : (*m)[0].layers)
    if (l.config.op_type == "RoiAlign") {
      EXPECT_EQ(l.config.kind, LayerKind::kRoiAlign);
      EXPECT_EQ(l.config.inputs[1].shape, (kernels::Shape{100, 4})) << l.name;  // the --max-detections boxes
    }
  const auto [verified, algorithms] = verify_ops(*m, {"RoiAlign", "ScatterElements"});
  EXPECT_EQ(verified, (std::set<std::string>{"RoiAlign", "ScatterElements"}));
  EXPECT_EQ(algorithms, (std::set<std::string>{"roi_align", "scatter_elements"}));
  EXPECT_EQ(count_cases(*m, "RoiAlign"), 3u);
}

// RAFT's correlation lookup (torchvision raft: grid_sample(bilinear, align_corners=True), zeros
// padding) on the 4-level pyramid of a 224 × 224 pair at 1/8: [784, 1, 28 >> k, 28 >> k] sampled
// at 9 × 9 points per pixel (radius 4); and the other opset-16 forms on a small image.
constexpr const char* kGridSamples = R"onnx(
<ir_version: 8, opset_import: ["" : 16]>
g (float[784,1,28,28] c0, float[784,1,14,14] c1, float[784,1,7,7] c2, float[784,1,3,3] c3,
   float[784,9,9,2] grid, float[2,3,11,13] img, float[2,6,5,2] g2)
    => (float y0, float y1, float y2, float y3, float n0, float n1, float b0, float b1, float b2)
{
  y0 = GridSample <align_corners = 1> (c0, grid)
  y1 = GridSample <align_corners = 1> (c1, grid)
  y2 = GridSample <align_corners = 1> (c2, grid)
  y3 = GridSample <align_corners = 1> (c3, grid)
  n0 = GridSample <mode = "nearest", padding_mode = "border"> (img, g2)
  n1 = GridSample <mode = "nearest", padding_mode = "reflection", align_corners = 1> (img, g2)
  b0 = GridSample <mode = "bicubic", padding_mode = "zeros"> (img, g2)
  b1 = GridSample <mode = "bicubic", padding_mode = "reflection"> (img, g2)
  b2 = GridSample <mode = "bilinear", padding_mode = "border"> (img, g2)
}
)onnx";

TEST(SamplingKernels, RaftCorrelationLookupsAndEveryGridSampleFormMatchTheReference) {
  auto m = mp::process_model_text(kGridSamples, "grid.onnx", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const auto [verified, algorithms] = verify_ops(*m, {"GridSample"});
  EXPECT_EQ(verified, (std::set<std::string>{"GridSample"}));
  EXPECT_EQ(algorithms, (std::set<std::string>{"grid_sample"}));
  EXPECT_EQ(count_cases(*m, "GridSample"), 9u);
}

constexpr const char* kScatterAndGather = R"onnx(
<ir_version: 8, opset_import: ["" : 18]>
g (float[4,6,5] d, int64[4,3,5] i1, float[4,3,5] u1, int64[2,6,4] i0, float[2,6,4] u0,
   float[2,5,7,3] gd, int64[2,5,4,1] gi, float[2,3,4] gd2, int64[2,3,1] gi2)
    => (float a, float b, float c, float e, float f, float g1, float g2)
{
  a = ScatterElements <axis = 1, reduction = "add"> (d, i1, u1)
  b = ScatterElements <axis = 1, reduction = "mul"> (d, i1, u1)
  c = ScatterElements <axis = 0, reduction = "max"> (d, i0, u0)
  e = ScatterElements <axis = -1, reduction = "min"> (d, i1, u1)
  f = ScatterElements <axis = 0> (d, i0, u0)
  g1 = GatherND <batch_dims = 2> (gd, gi)
  g2 = GatherND <batch_dims = 1> (gd2, gi2)
}
)onnx";

TEST(SamplingKernels, ScatterElementsReductionsAndBatchedGatherNdMatchTheReference) {
  auto m = mp::process_model_text(kScatterAndGather, "scatter.onnx", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const auto [verified, algorithms] = verify_ops(*m, {"ScatterElements", "GatherND"});
  EXPECT_EQ(verified, (std::set<std::string>{"ScatterElements", "GatherND"}));
  EXPECT_EQ(algorithms, (std::set<std::string>{"scatter_elements", "gather_nd"}));
  EXPECT_EQ(count_cases(*m, "ScatterElements"), 5u);
  EXPECT_EQ(count_cases(*m, "GatherND"), 2u);
}

TEST(SamplingKernels, AnUnsupportedFormSaysWhy) {
  Problem p = problem(LayerKind::kGridSample, {{"x", {1, 1, 4, 4, 4}}, {"grid", {1, 2, 2, 2, 3}}},
                      {{"y", {1, 1, 2, 2, 2}}});
  p.ints = {{"align_corners", {0}}};
  p.strings = {{"mode", "bilinear"}, {"padding_mode", "zeros"}};
  kernels::CaseSpec spec;
  spec.problem = p;
  spec.variant.backend = "floorline";
  spec.variant.algorithm = "grid_sample";
  spec.variant.dtype = DType::kF32;
  auto k = kernels::make_floorline_kernel(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  EXPECT_NE(k.error().message.find("(4-D)"), std::string::npos) << k.error().message;
}

}  // namespace
}  // namespace floorline::gen
