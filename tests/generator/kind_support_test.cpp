// Every compute kind has, for the reference and for each backend built here, a mapping or a declared
// reason; and docs/ADDING_A_LAYER.md names files that exist and hold the tables it says they hold.
// No device needed: the support tables answer without one.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "floorline/generator/backend.hpp"
#include "floorline/kernels/floorline.hpp"
#include "floorline/kernels/onednn.hpp"
#include "floorline/kernels/reference.hpp"
#include "floorline/model_processor/layer.hpp"

namespace floorline::gen {
namespace {

std::vector<LayerKind> compute_kinds() {
  std::vector<LayerKind> out;
  for (LayerKind k : kAllLayerKinds)
    if (mp::kind_cost_class(k) == mp::CostClass::kCompute) out.push_back(k);
  return out;
}

TEST(KindSupport, KindListNamesMatchTheOnnxOps) {
  // The X-macro list gives each enumerator its ONNX name; lookups go both ways.
  EXPECT_EQ(kind_name(LayerKind::kConv), "Conv");
  EXPECT_EQ(kind_name(LayerKind::kGlobalAveragePool), "GlobalAveragePool");
  EXPECT_EQ(kind_from_name("BatchNormalization"), LayerKind::kBatchNormalization);
  EXPECT_EQ(kind_from_name("Unsupported"), std::nullopt);
  EXPECT_EQ(kind_from_name("Hardmax"), std::nullopt);  // not a kind
  for (LayerKind k : kAllLayerKinds) {
    if (k == LayerKind::kUnsupported) continue;
    EXPECT_EQ(kind_from_name(kind_name(k)), k) << kind_name(k);
  }
  EXPECT_EQ(kAllLayerKinds.back(), LayerKind::kUnsupported);
}

TEST(KindSupport, EveryComputeKindIsMappedOrDeclaredUnsupportedByEveryBackend) {
  const auto kinds = compute_kinds();
  ASSERT_GT(kinds.size(), 60u);
  // Only backends whose plugin loaded answer from their own table (a stand-in for one this build
  // lacks would pass with its load error); oneDNN's is built wherever this test is.
  std::vector<const Backend*> loaded;
  for (const Backend* b : backends())
    if (plugin_path(*b).ok()) loaded.push_back(b);
  ASSERT_FALSE(loaded.empty());
  for (LayerKind k : kinds) {
    const auto ref = kernels::reference_support(k);
    EXPECT_TRUE(ref.supported() || !ref.reason.empty()) << "reference: " << kind_name(k);
    for (const Backend* b : loaded) {
      const auto s = b->support(k);
      EXPECT_TRUE(s.supported() || !s.reason.empty()) << b->name() << ": " << kind_name(k);
    }
  }
}

TEST(KindSupport, TablesSayWhatTheyMapAndWhy) {
  // Real entries, not placeholders: oneDNN's algorithms, a proxy's caveat, a declared reason.
  EXPECT_EQ(kernels::onednn_support(LayerKind::kConv).mapping,
            "convolution_direct, convolution_winograd, matmul, convolution_direct_split, "
            "convolution_direct@channels_last");
  EXPECT_EQ(kernels::onednn_support(LayerKind::kMatMul).mapping, "matmul, matmul_flat");
  EXPECT_EQ(kernels::onednn_support(LayerKind::kLSTM).mapping,
            "rnn, matmul_standard, matmul_standard_batched");
  const auto gather = kernels::onednn_support(LayerKind::kGather);
  EXPECT_TRUE(gather.supported());
  EXPECT_EQ(gather.reason, "no oneDNN primitive: timed as a copy of its output");
  const auto floor = kernels::onednn_support(LayerKind::kFloor);
  EXPECT_FALSE(floor.supported());
  EXPECT_EQ(floor.reason.rfind("not mapped: ", 0), 0u) << floor.reason;
  EXPECT_FALSE(kernels::onednn_support(LayerKind::kReshape).supported());
  EXPECT_TRUE(kernels::reference_support(LayerKind::kLRN).supported());
  EXPECT_FALSE(kernels::reference_support(LayerKind::kGather).supported());
  // The planner's reason for a kind a backend does not map is that table's reason.
  // A backend whose plugin this build lacks is listed as a stand-in (plugin_path says why): only
  // loaded plugins answer from their tables.
  if (const Backend* onednn = find_backend("onednn"); onednn && plugin_path(*onednn).ok()) {
    EXPECT_EQ(onednn->support(LayerKind::kFloor).reason, floor.reason);
  }
  if (const Backend* cuda = find_backend("cuda"); cuda && plugin_path(*cuda).ok()) {
    EXPECT_TRUE(cuda->support(LayerKind::kConv).supported());
    EXPECT_NE(cuda->support(LayerKind::kConv).mapping.find("cudnnConvolutionForward"),
              std::string_view::npos);
    EXPECT_FALSE(cuda->support(LayerKind::kConvTranspose).supported());
  }
}

TEST(KindSupport, XnnpackAndOpenblasTablesSayWhatTheyMapAndWhy) {
  // Their plugins answer from their own tables (kernels::xnnpack_support, openblas_support) where
  // their libraries were found; a build without them lists stand-ins whose reason is the load error.
  if (const Backend* x = find_backend("xnnpack"); x && plugin_path(*x).ok()) {
    EXPECT_EQ(x->support(LayerKind::kConv).mapping,
              "xnn_create_convolution2d_nhwc_f32 (2-D; grouped and depthwise)");
    EXPECT_EQ(x->support(LayerKind::kMaxPool).mapping, "xnn_create_max_pooling2d_nhwc_f32");
    EXPECT_EQ(x->support(LayerKind::kMatMul).mapping, "xnn_create_fully_connected_nc_f32 (2-D weights)");
    EXPECT_EQ(x->support(LayerKind::kRelu).mapping, "xnn_create_clamp_nc_f32");
    EXPECT_FALSE(x->support(LayerKind::kTanh).supported());
    EXPECT_EQ(x->support(LayerKind::kTanh).reason,
              "not mapped: XNNPACK 2022-02 has tanh for quantized types only");
    EXPECT_EQ(x->support(LayerKind::kReshape).reason.rfind("not mapped: ", 0), 0u);
    size_t mapped = 0;
    for (LayerKind k : compute_kinds()) mapped += x->support(k).supported() ? 1 : 0;
    EXPECT_EQ(mapped, 24u);  // Conv, Gemm, MatMul; 3 pools; 11 unary; Softmax; 6 binary
  } else if (x) {
    EXPECT_FALSE(x->available().ok());
    EXPECT_FALSE(x->support(LayerKind::kConv).supported());
  }
  if (const Backend* b = find_backend("openblas"); b && plugin_path(*b).ok()) {
    EXPECT_EQ(b->support(LayerKind::kGemm).mapping, "cblas_sgemm");
    EXPECT_EQ(b->support(LayerKind::kConv).mapping, "im2col + cblas_sgemm per group (NCHW, 2-D)");
    EXPECT_TRUE(b->support(LayerKind::kMatMul).supported());
    EXPECT_EQ(b->support(LayerKind::kRelu).reason, "not mapped: OpenBLAS is a BLAS (matrix products only)");
    EXPECT_TRUE(b->support(LayerKind::kLSTM).supported());  // input-projection GEMM + per-step products
    size_t mapped = 0;
    for (LayerKind k : compute_kinds()) mapped += b->support(k).supported() ? 1 : 0;
    EXPECT_EQ(mapped, 6u);  // Conv, Gemm, MatMul; LSTM, GRU, RNN
  }
}

// Floorline's own CPU kernels: the floorline backend (always built) maps the kinds no CPU vendor
// library runs and those where a plain kernel of ours is planned beside them; oneDNN no longer
// claims any of them.
TEST(KindSupport, TheFloorlineTableHoldsOurKernelsAndOnlyThem) {
  EXPECT_EQ(kernels::floorline_support(LayerKind::kTopK).mapping, "topk");
  EXPECT_EQ(kernels::floorline_support(LayerKind::kArgMin).mapping, "arg_reduce");
  EXPECT_EQ(kernels::floorline_support(LayerKind::kConcat).mapping, "concat");
  EXPECT_EQ(kernels::floorline_support(LayerKind::kConv).mapping, "winograd_f4x4_3x3");
  EXPECT_EQ(kernels::floorline_support(LayerKind::kConvTranspose).reason.rfind("not mapped: ", 0), 0u);
  std::set<std::string> ours;
  for (LayerKind k : compute_kinds())
    if (kernels::floorline_support(k).supported()) ours.insert(std::string(kind_name(k)));
  EXPECT_EQ(ours, (std::set<std::string>{"CumSum",
                                         "ArgMax",
                                         "ArgMin",
                                         "TopK",
                                         "GatherND",
                                         "NonZero",
                                         "NonMaxSuppression",
                                         "RoiAlign",
                                         "ScatterElements",
                                         "GridSample",
                                         "Softmax",
                                         "LogSoftmax",
                                         "Concat",
                                         "Resize",
                                         "ReduceMean",
                                         "ReduceSum",
                                         "ReduceMax",
                                         "ReduceMin",
                                         "Add",
                                         "Sub",
                                         "Mul",
                                         "Div",
                                         "Expand",
                                         "Slice",
                                         "Split",
                                         "Transpose",
                                         "Tile",
                                         "Pad",
                                         "Sigmoid",
                                         "GlobalAveragePool",
                                         "Gemm",
                                         "MatMul",
                                         "MatMulNBits",
                                         "Conv"}));
  for (const char* op : {"TopK", "NonMaxSuppression", "RoiAlign", "CumSum"}) {
    const auto s = kernels::onednn_support(*kind_from_name(op));
    EXPECT_FALSE(s.supported()) << op;
    EXPECT_NE(s.reason.find("the floorline backend runs it"), std::string_view::npos) << s.reason;
  }
  const Backend* floorline = find_backend("floorline");
  ASSERT_NE(floorline, nullptr);
  ASSERT_TRUE(plugin_path(*floorline).ok());  // always built
  EXPECT_EQ(floorline->device_kind(), "cpu");
  EXPECT_EQ(floorline->support(LayerKind::kNonZero).mapping, "nonzero");
  EXPECT_TRUE(is_own_kernel(CaseVariant{"floorline", "topk", DType::kF32, MathMode::kFp32, "", ""}));
  EXPECT_TRUE(
      is_own_kernel(CaseVariant{"cuda", "floorline-kernel:copy", DType::kF32, MathMode::kFp32, "", ""}));
  EXPECT_FALSE(
      is_own_kernel(CaseVariant{"onednn", "concat:simple:any", DType::kF32, MathMode::kFp32, "", ""}));
  EXPECT_FALSE(is_own_kernel(CaseVariant{"cuda", "cudnn_pooling", DType::kF16, MathMode::kF16, "", ""}));
}

TEST(KindSupport, AnAttributeTheIrAlwaysFillsIsRequiredNotDefaulted) {
  // LeakyRelu's alpha has an ONNX default that the IR writes into every config: a Problem without
  // it is malformed, and the reference says so instead of assuming 0.01.
  kernels::Problem p;
  p.kind = LayerKind::kLeakyRelu;
  p.op = "LeakyRelu";
  p.key = "LeakyRelu|x=4|f32";
  p.inputs = {{"x", {4}}};
  p.outputs = {{"y", {4}}};
  const std::vector<kernels::HostTensor> in = {{{4}, {-1.f, 0.f, 1.f, 2.f}}};
  auto missing = kernels::reference(p, in, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "LeakyRelu|x=4|f32: attribute 'alpha' is missing (the IR always fills it)");
  EXPECT_THROW((void)p.int_attr("axis"), kernels::MissingAttribute);
  EXPECT_EQ(p.int_attr("axis", 3), 3);  // the two-argument form is for attributes that may be absent
  p.floats["alpha"] = {0.25};
  auto y = kernels::reference(p, in, {});
  ASSERT_TRUE(y.ok()) << y.error().message;
  EXPECT_EQ((*y)[0].data, (std::vector<float>{-0.25f, 0.f, 1.f, 2.f}));
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(AddingALayerDoc, FilesToTouchExistAndHoldTheirMarkers) {
  const std::filesystem::path root = FLOORLINE_SOURCE_DIR;
  const std::string doc = read_text(root / "docs/ADDING_A_LAYER.md");
  ASSERT_FALSE(doc.empty());
  // Rows of the "files to touch" table: | `path` | `marker` | what to add |
  const std::regex row(R"(^\| `([^`]+)` \| `([^`]+)` \|)");
  std::set<std::string> files;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string path = m[1], marker = m[2];
    files.insert(path);
    const std::string text = read_text(root / path);
    EXPECT_FALSE(text.empty()) << path << " named in docs/ADDING_A_LAYER.md does not exist";
    EXPECT_NE(text.find(marker), std::string::npos) << path << " no longer contains `" << marker << "`";
  }
  ASSERT_GE(files.size(), 5u) << "the files-to-touch table was not found";
  // The kind list, the kinds table and the reference, and every backend built here, are rows.
  for (const char* f : {"common/include/floorline/common/layer_kind.hpp", "model_processor/src/kinds.cpp",
                        "generator/kernels/src/reference.cpp", "docs/LAYERS.md"})
    EXPECT_TRUE(files.count(f)) << f << " is missing from docs/ADDING_A_LAYER.md";
  for (const Backend* b : backends()) {
    if (!plugin_path(*b).ok()) continue;  // not built here: its folder may not exist
    const std::string folder = "generator/backends/" + b->name() + "/";
    const bool listed = std::any_of(files.begin(), files.end(),
                                    [&](const std::string& f) { return f.rfind(folder, 0) == 0; });
    EXPECT_TRUE(listed) << "backend " << b->name() << " has no row in docs/ADDING_A_LAYER.md";
  }
}

}  // namespace
}  // namespace floorline::gen
