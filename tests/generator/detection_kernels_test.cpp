// The detection-head kinds (TopK, GatherND, NonZero, NonMaxSuppression). Their
// oracle against the worked examples of the ONNX operator documentation (onnx/docs/
// Operators.md, the examples under each operator), and Floorline's own CPU kernels
// (the floorline backend) against the reference on ssdlite320_mobilenet_v3_large's
// real layers, with inputs that realise the --max-detections count.
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

std::vector<HostTensor> run_reference(const Problem& p, const std::vector<HostTensor>& in) {
  auto r = kernels::reference(p, in, {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::vector<HostTensor>{};
}

TEST(DetectionReference, TopKAsTheOnnxExampleWithTiesLowerIndexFirst) {
  // Operators.md TopK, top_k: X = [[0..3], [4..7], [8..11]], k = 3, axis = 1.
  Problem p = problem(LayerKind::kTopK, {{"x", {3, 4}}}, {{"y0", {3, 3}}, {"y1", {3, 3}}});
  p.ints = {{"axis", {1}}, {"largest", {1}}, {"sorted", {1}}, {"k", {3}}};
  HostTensor x{{3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}};
  auto out = run_reference(p, {x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, (std::vector<float>{3, 2, 1, 7, 6, 5, 11, 10, 9}));
  EXPECT_EQ(out[1].data, (std::vector<float>{3, 2, 1, 3, 2, 1, 3, 2, 1}));
  // Equal values: the lower index first (the operator's tie rule); largest = 0 along axis 0.
  Problem q = problem(LayerKind::kTopK, {{"x", {4, 1}}}, {{"y0", {2, 1}}, {"y1", {2, 1}}});
  q.ints = {{"axis", {0}}, {"largest", {0}}, {"sorted", {1}}};
  out = run_reference(q, {HostTensor{{4, 1}, {5, -1, 7, -1}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, (std::vector<float>{-1, -1}));
  EXPECT_EQ(out[1].data, (std::vector<float>{1, 3}));
}

TEST(DetectionReference, GatherNdAsTheOnnxExamples) {
  // Operators.md GatherND example 1: data [[0,1],[2,3]], indices [[0,0],[1,1]] -> [0, 3].
  Problem p = problem(LayerKind::kGatherND, {{"x", {2, 2}}, {"indices", {2, 2}}}, {{"y", {2}}});
  p.ints = {{"batch_dims", {0}}};
  auto out = run_reference(p, {HostTensor{{2, 2}, {0, 1, 2, 3}}, HostTensor{{2, 2}, {0, 0, 1, 1}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, (std::vector<float>{0, 3}));
  // Example 5, batch_dims = 1: data [[[0,1],[2,3]],[[4,5],[6,7]]], indices [[1],[0]] -> [[2,3],[4,5]].
  Problem b = problem(LayerKind::kGatherND, {{"x", {2, 2, 2}}, {"indices", {2, 1}}}, {{"y", {2, 2}}});
  b.ints = {{"batch_dims", {1}}};
  out = run_reference(b, {HostTensor{{2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}}, HostTensor{{2, 1}, {1, 0}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, (std::vector<float>{2, 3, 4, 5}));
  // A negative index counts from the end; one out of range is an error.
  out = run_reference(p, {HostTensor{{2, 2}, {0, 1, 2, 3}}, HostTensor{{2, 2}, {-1, 0, 0, -1}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, (std::vector<float>{2, 1}));
  EXPECT_FALSE(
      kernels::reference(p, {HostTensor{{2, 2}, {0, 1, 2, 3}}, HostTensor{{2, 2}, {2, 0, 0, 0}}}, {}).ok());
}

TEST(DetectionReference, NonZeroAsTheOnnxExample) {
  // Operators.md NonZero: [[1, 0], [1, 1]] -> [[0, 1, 1], [0, 0, 1]].
  Problem p = problem(LayerKind::kNonZero, {{"x", {2, 2}}}, {{"y", {2, 3}}});
  auto out = run_reference(p, {HostTensor{{2, 2}, {1, 0, 1, 1}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (kernels::Shape{2, 3}));
  EXPECT_EQ(out[0].data, (std::vector<float>{0, 1, 1, 0, 0, 1}));
}

TEST(DetectionReference, NonMaxSuppressionAsTheOnnxExamples) {
  // Operators.md NonMaxSuppression, nonmaxsuppression_suppress_by_IOU (max_output_boxes_per_class 3,
  // iou_threshold 0.5, score_threshold 0) -> [[0, 0, 3], [0, 0, 0], [0, 0, 5]].
  const std::vector<float> corners = {0, 0,  1, 1,  0, 0.1f,  1, 1.1f,  0, -0.1f, 1, 0.9f,
                                      0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100,   1, 101};
  const HostTensor scores{{1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f}};
  Problem p =
      problem(LayerKind::kNonMaxSuppression, {{"boxes", {1, 6, 4}}, {"scores", {1, 1, 6}}}, {{"y", {3, 3}}});
  p.ints = {{"max_output_boxes_per_class", {3}}, {"center_point_box", {0}}};
  p.floats = {{"iou_threshold", {0.5}}, {"score_threshold", {0.0}}};
  auto out = run_reference(p, {HostTensor{{1, 6, 4}, corners}, scores});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, (std::vector<float>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // nonmaxsuppression_center_point_box_format: the same boxes as [x_c, y_c, w, h].
  const std::vector<float> centers = {0.5f, 0.5f,  1, 1, 0.5f, 0.6f,  1, 1, 0.5f, 0.4f,   1, 1,
                                      0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1};
  p.ints["center_point_box"] = {1};
  out = run_reference(p, {HostTensor{{1, 6, 4}, centers}, scores});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, (std::vector<float>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // nonmaxsuppression_limit_output_size: max_output_boxes_per_class 2 -> [[0, 0, 3], [0, 0, 0]];
  // nonmaxsuppression_score_threshold: score_threshold 0.4, max 3 -> [[0, 0, 3], [0, 0, 0]].
  p.ints = {{"max_output_boxes_per_class", {2}}, {"center_point_box", {0}}};
  out = run_reference(p, {HostTensor{{1, 6, 4}, corners}, scores});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, (std::vector<float>{0, 0, 3, 0, 0, 0}));
  p.ints["max_output_boxes_per_class"] = {3};
  p.floats["score_threshold"] = {0.4};
  out = run_reference(p, {HostTensor{{1, 6, 4}, corners}, scores});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, (std::vector<float>{0, 0, 3, 0, 0, 0}));
}

// Every planned floorline case of `ops` built and verified; returns the ops verified and the
// algorithms seen.
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
    (*k)->run();  // a timed call runs again on the same buffers
    if (s.ok()) verified.insert(c.spec.problem.op);
  }
  return {verified, algorithms};
}

TEST(DetectionKernels, SsdliteDetectionHeadLayersMatchTheReference) {
  mp::ProcessOptions o;
  o.max_detections = 40;  // not the default: the kernels realise whatever count was assumed
  auto r = mp::process_model(
      std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/ssdlite320_mobilenet_v3_large.onnx", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto [verified, algorithms] = verify_ops(*r, {"TopK", "GatherND", "NonZero", "NonMaxSuppression"});
  EXPECT_EQ(verified, (std::set<std::string>{"TopK", "GatherND", "NonZero", "NonMaxSuppression"}));
  EXPECT_EQ(algorithms, (std::set<std::string>{"topk", "gather_nd", "nonzero", "nms"}));
}

constexpr const char* kSmallModel = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,50] s, float[2,3,4] d, int64[5,2] i, float[1,30,4] boxes,
   float[1,1,30] scores, float[3,8,5] a)
    => (float v, int64 ix, float gnd, int64 nz, int64 sel, float cs, int64 am, int64 an)
{
  k = Constant <value = int64[1] {7}> ()
  v, ix = TopK <axis = -1, largest = 0> (s, k)
  gnd = GatherND (d, i)
  nz = NonZero (s)
  mo = Constant <value = int64[1] {100}> ()
  iou = Constant <value = float[1] {0.45}> ()
  sel = NonMaxSuppression (boxes, scores, mo, iou)
  ax = Constant <value = int64[1] {1}> ()
  cs = CumSum <exclusive = 1, reverse = 1> (a, ax)
  am = ArgMax <axis = 1, select_last_index = 1> (a)
  an = ArgMin <axis = 2, keepdims = 0> (a)
}
)onnx";

TEST(DetectionKernels, EveryOwnKernelFormMatchesTheReference) {
  mp::ProcessOptions o;
  o.max_detections = 12;
  auto m = mp::process_model_text(kSmallModel, "small.onnx", o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const auto [verified, algorithms] =
      verify_ops(*m, {"TopK", "GatherND", "NonZero", "NonMaxSuppression", "CumSum", "ArgMax", "ArgMin"});
  EXPECT_EQ(verified, (std::set<std::string>{"TopK", "GatherND", "NonZero", "NonMaxSuppression", "CumSum",
                                             "ArgMax", "ArgMin"}));
  EXPECT_TRUE(algorithms.count("cumsum"));
  EXPECT_TRUE(algorithms.count("arg_reduce"));
}

TEST(DetectionKernels, AnUnrealisableSelectionIsUnsupportedWithItsReason) {
  // 12 selected boxes over 2 classes of 3 boxes each: at most 6 can survive.
  Problem p =
      problem(LayerKind::kNonMaxSuppression, {{"boxes", {1, 3, 4}}, {"scores", {1, 2, 3}}}, {{"y", {12, 3}}});
  p.ints = {{"max_output_boxes_per_class", {100}}, {"center_point_box", {0}}};
  p.floats = {{"iou_threshold", {0.5}}};
  kernels::CaseSpec spec;
  spec.problem = p;
  spec.variant.backend = "floorline";
  spec.variant.algorithm = "nms";
  spec.variant.dtype = DType::kF32;
  auto k = kernels::make_floorline_kernel(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported);
  EXPECT_NE(k.error().message.find("6 boxes per class cannot be selected"), std::string::npos)
      << k.error().message;
  spec.variant.dtype = DType::kBF16;
  k = kernels::make_floorline_kernel(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.error().message.find("runs f32, not bf16"), std::string::npos) << k.error().message;
}

}  // namespace
}  // namespace floorline::gen
