// Full-weight copies of the shape-only zoo (materialize.hpp): the same graph, deterministic values
// in their ranges, page-aligned external data, clear errors; the copy runs in ONNX Runtime where
// the reference runtime is installed.
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "floorline/model_processor/materialize.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::mp {
namespace {

namespace fs = std::filesystem;

fs::path zoo(const std::string& name) {
  return fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo" / (name + ".onnx");
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("floorline_materialize_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

onnx::ModelProto load(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromIstream(&in)) << p;
  return m;
}

void save(const onnx::ModelProto& m, const fs::path& p) {
  std::ofstream out(p, std::ios::binary);
  ASSERT_TRUE(m.SerializeToOstream(&out));
}

std::map<std::string, std::string> external(const onnx::TensorProto& t) {
  std::map<std::string, std::string> e;
  for (const auto& kv : t.external_data()) e[kv.key()] = kv.value();
  return e;
}

std::vector<float> floats_of(const fs::path& data, const onnx::TensorProto& t) {
  const auto e = external(t);
  const int64_t offset = std::stoll(e.at("offset")), length = std::stoll(e.at("length"));
  std::ifstream in(data, std::ios::binary);
  in.seekg(offset);
  std::vector<float> v(static_cast<size_t>(length / 4));
  in.read(reinterpret_cast<char*>(v.data()), length);
  return v;
}

const onnx::TensorProto& initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return t;
  throw std::runtime_error("no initializer " + name);
}

// The name of the initializer `op`'s input `input` reads (first such node).
std::string input_of(const onnx::ModelProto& m, const std::string& op, int input) {
  for (const auto& n : m.graph().node())
    if (n.op_type() == op && n.input_size() > input) return n.input(input);
  throw std::runtime_error("no " + op);
}

TEST(Materialize, ZooCopiesKeepTheGraphAndGetAlignedDeterministicWeights) {
  TempDir dir;
  for (const std::string name : {"resnet18", "bert_base_encoder", "mobilenet_v3_small"}) {
    SCOPED_TRACE(name);
    auto r = materialize_model(zoo(name), dir.path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->model, dir.path / (name + ".onnx"));
    EXPECT_EQ(r->copied, 0);
    EXPECT_GT(r->generated, 0);
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(r->data)), r->data_bytes);

    const auto src = load(zoo(name)), copy = load(r->model);
    ASSERT_EQ(copy.graph().node_size(), src.graph().node_size());
    for (int k = 0; k < src.graph().node_size(); ++k)
      EXPECT_EQ(copy.graph().node(k).name(), src.graph().node(k).name());
    ASSERT_EQ(copy.graph().initializer_size(), src.graph().initializer_size());
    int64_t external_tensors = 0, elements = 0;
    for (int k = 0; k < src.graph().initializer_size(); ++k) {
      const auto &a = src.graph().initializer(k), &b = copy.graph().initializer(k);
      EXPECT_EQ(b.name(), a.name());
      EXPECT_EQ(b.data_type(), a.data_type());
      EXPECT_EQ(std::vector<int64_t>(b.dims().begin(), b.dims().end()),
                std::vector<int64_t>(a.dims().begin(), a.dims().end()));
      if (b.data_location() != onnx::TensorProto::EXTERNAL) continue;
      ++external_tensors;
      const auto e = external(b);
      EXPECT_EQ(e.at("location"), name + ".onnx.data");
      EXPECT_EQ(std::stoll(e.at("offset")) % kMaterializeAlignment, 0) << b.name();
      int64_t n = 1;
      for (auto d : b.dims()) n *= d;
      EXPECT_EQ(std::stoll(e.at("length")), n * 4) << b.name();  // the zoo is f32
      elements += n;
    }
    EXPECT_EQ(external_tensors, r->generated);
    EXPECT_GE(r->data_bytes, elements * 4);

    // Floorline sees the same model: the same layers with the same canonical keys.
    auto a = process_model(zoo(name), {}), b = process_model(r->model, {});
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(b->front().layers.size(), a->front().layers.size());
    for (size_t k = 0; k < a->front().layers.size(); ++k)
      EXPECT_EQ(b->front().layers[k].key, a->front().layers[k].key) << a->front().layers[k].name;

    // A second copy has the same bytes; the copy is up to date until the source changes.
    TempDir again;
    auto r2 = materialize_model(zoo(name), again.path);
    ASSERT_TRUE(r2.ok());
    std::ifstream x(r->data, std::ios::binary), y(r2->data, std::ios::binary);
    EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(x), {}, std::istreambuf_iterator<char>(y)));
    EXPECT_TRUE(materialized_up_to_date(zoo(name), dir.path));
    EXPECT_FALSE(materialized_up_to_date(zoo(name), dir.path / "elsewhere"));
  }
}

TEST(Materialize, ValuesAreInTheirRangesFiniteAndNeverDenormal) {
  TempDir dir;
  auto r = materialize_model(zoo("resnet18"), dir.path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto m = load(r->model);
  // The first conv: 64x3x7x7, fan-in 3*7*7 = 147: He-uniform bound sqrt(6 / 147).
  const auto& w = initializer(m, input_of(m, "Conv", 1));
  ASSERT_EQ(w.dims_size(), 4);
  const int64_t fan_in = w.dims(1) * w.dims(2) * w.dims(3);
  const double bound = std::sqrt(6.0 / static_cast<double>(fan_in));
  const auto v = floats_of(r->data, w);
  ASSERT_FALSE(v.empty());
  double lo = 1e9, hi = -1e9, sum = 0;
  for (float f : v) {
    ASSERT_TRUE(std::isfinite(f));
    ASSERT_TRUE(f == 0 || std::fabs(f) >= std::numeric_limits<float>::min());
    lo = std::min<double>(lo, f);
    hi = std::max<double>(hi, f);
    sum += f;
  }
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9 * bound);  // the range is used, not a constant
  EXPECT_GT(hi, 0.9 * bound);
  EXPECT_LT(std::fabs(sum / static_cast<double>(v.size())), 0.05 * bound);

  // fill_values: f16 never denormal, the stream does not depend on the dtype's width, ints are 0/1.
  auto h = fill_values("t", DataType::kF16, 4096, FillRole::kWeight, 1 << 20);
  ASSERT_TRUE(h.ok());
  for (size_t k = 0; k < h->size(); k += 2) {
    uint16_t bits;
    std::memcpy(&bits, h->data() + k, 2);
    EXPECT_FALSE((bits & 0x7c00) == 0 && (bits & 0x3ff) != 0) << "denormal f16 at " << k / 2;
  }
  auto i = fill_values("t", DataType::kI64, 1000, FillRole::kWeight, 1);
  ASSERT_TRUE(i.ok());
  std::set<int64_t> seen;
  for (size_t k = 0; k < i->size(); k += 8) {
    int64_t x;
    std::memcpy(&x, i->data() + k, 8);
    seen.insert(x);
  }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1}));
  EXPECT_FALSE(fill_values("t", DataType::kString, 4, FillRole::kWeight, 1).ok());
}

// A one-node model whose weight is external (the data file absent), with dims and type to test.
// `op` reads the weight as its input `slot` (the inputs before it are graph inputs).
fs::path tiny_model(const fs::path& dir, std::vector<int64_t> dims, int32_t type, const std::string& location,
                    const std::string& op = "Add", int slot = 1) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(type);
  for (auto d : dims) t->add_dims(d);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value(location);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("node");
  n->add_input("x");
  for (int k = 1; k < slot; ++k) {
    const std::string name = "in" + std::to_string(k);
    g->add_input()->set_name(name);
    n->add_input(name);
  }
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  const fs::path p = dir / "tiny.onnx";
  save(m, p);
  return p;
}

TEST(Materialize, ClearErrors) {
  TempDir dir, out;
  auto expect_error = [&](const fs::path& model, const fs::path& to, const std::string& want) {
    auto r = materialize_model(model, to);
    ASSERT_FALSE(r.ok()) << model;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(model.string()), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  };
  // A complete model: its copy (weights present) has nothing left to fill.
  auto r = materialize_model(zoo("squeezenet1_1"), out.path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_error(r->model, dir.path, "nothing to materialize");
  auto missing = count_missing_tensors(r->model);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, 0);
  auto zoo_missing = count_missing_tensors(zoo("squeezenet1_1"));
  ASSERT_TRUE(zoo_missing.ok());
  EXPECT_EQ(*zoo_missing, r->generated);

  expect_error(tiny_model(dir.path, {-1, 4}, 1, "w.bin"), out.path, "unknown");
  expect_error(tiny_model(dir.path, {int64_t{1} << 40, int64_t{1} << 40}, 1, "w.bin"), out.path, "overflow");
  expect_error(tiny_model(dir.path, {300}, 8, "w.bin"), out.path, "cannot generate values of string");
  expect_error(tiny_model(dir.path, {300}, 1, "../outside.bin"), out.path, "leaves the model's folder");
  expect_error(tiny_model(dir.path, {300}, 1, "/etc/passwd"), out.path, "absolute");
  expect_error(tiny_model(dir.path, {300}, 1, "w.bin"), dir.path, "the model's own folder");
  // The same tiny model with valid dims works, and its external data is found by ONNX's rules.
  auto ok = materialize_model(tiny_model(dir.path, {300}, 1, "w.bin"), out.path);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->generated, 1);
  EXPECT_EQ(ok->data_bytes, 1200);
}

TEST(Materialize, NormalizationVariancesAreFilledPositive) {
  TempDir dir, out;
  auto r = materialize_model(tiny_model(dir.path, {512}, 1, "w.bin", "BatchNormalization", 4), out.path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto m = load(r->model);
  const auto v = floats_of(r->data, initializer(m, "w"));
  ASSERT_EQ(v.size(), 512u);
  for (float f : v) EXPECT_TRUE(f >= 0.5f && f <= 1.5f) << f;
  // The same tensor read by an Add is a bias: small and centred.
  auto b = materialize_model(tiny_model(dir.path, {512}, 1, "w.bin", "Add", 1), out.path);
  ASSERT_TRUE(b.ok());
  for (float f : floats_of(b->data, initializer(load(b->model), "w")))
    EXPECT_TRUE(f >= -0.1f && f <= 0.1f) << f;
}

// The copy runs in ONNX Runtime (reference/onnxruntime/measure.js), where it is installed.
TEST(Materialize, TheCopyRunsInOnnxRuntime) {
  const fs::path ref = fs::path(FLOORLINE_SOURCE_DIR) / "reference/onnxruntime";
  if (!fs::exists(ref / "node_modules/onnxruntime-node/package.json") ||
      std::system("node --version >/dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "ONNX Runtime is not installed (scripts/install-deps, or npm ci --prefix reference/onnxruntime)";
  TempDir dir;
  auto r = materialize_model(zoo("squeezenet1_1"), dir.path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const fs::path out = dir.path / "ort.json";
  const std::string cmd =
      "node " + (ref / "measure.js").string() +
      " --settings all --min-runs 2 --min-time-ms 0 --warmup 1 --profile-runs 2 --batch 1,2 --out " +
      out.string() + " " + r->model.string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"runtime\": \"onnxruntime\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"batch\": 2"), std::string::npos) << text;
  EXPECT_NE(text.find("\"skipped\": []"), std::string::npos) << text;
  EXPECT_TRUE(fs::exists(dir.path / "squeezenet1_1_b1_all.profile.json"));
  EXPECT_TRUE(fs::exists(dir.path / "squeezenet1_1_b1_all.optimized.onnx"));
  EXPECT_FALSE(fs::exists(dir.path / "squeezenet1_1_b1_all.optimized.onnx.data"));
}

}  // namespace
}  // namespace floorline::mp
