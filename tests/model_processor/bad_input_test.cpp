// Bad input: every case gives a one-line error that names the file; nothing crashes.
#include <unistd.h>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include "floorline/model_processor/zoo.hpp"
#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

namespace fs = std::filesystem;

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("floorline_bad_input_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    const auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  fs::path write_model(const std::string& name, const onnx::ModelProto& m) {
    return write(name, m.SerializeAsString());
  }

  static onnx::ModelProto parse(const std::string& text) {
    onnx::ModelProto m;
    auto st = onnx::OnnxParser::Parse(m, text.c_str());
    EXPECT_TRUE(st.IsOK()) << st.ErrorMessage();
    return m;
  }

  static std::string error_of(const fs::path& p) {
    auto r = process_model(p, ProcessOptions{});
    EXPECT_FALSE(r.ok()) << p << " should fail";
    if (r.ok()) return "";
    const std::string& msg = r.error().message;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line error: " << msg;
    EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << "error does not start with the file name: " << msg;
    return msg;
  }

  fs::path dir_;
};

TEST_F(BadInput, EmptyFile) {
  EXPECT_NE(error_of(write("empty.onnx", "")).find("empty file"), std::string::npos);
}

TEST_F(BadInput, GarbageFile) {
  const auto msg = error_of(write("garbage.onnx", "\x08\x96\x01 this is not a model at all \xff\xfe"));
  EXPECT_NE(msg.find("not an ONNX model"), std::string::npos) << msg;
}

TEST_F(BadInput, TruncatedModel) {
  std::ifstream in(fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo/resnet18.onnx", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  const auto msg = error_of(write("truncated.onnx", bytes.substr(0, bytes.size() / 2)));
  EXPECT_NE(msg.find("not an ONNX model"), std::string::npos) << msg;
}

TEST_F(BadInput, NoGraph) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  EXPECT_NE(error_of(write_model("nograph.onnx", m)).find("has no graph"), std::string::npos);
}

TEST_F(BadInput, IrVersionZero) {
  auto m = parse(model_text("g (float[N,4] x) => (y) {\n  y = Relu (x)\n}"));
  m.set_ir_version(0);
  EXPECT_NE(error_of(write_model("ir0.onnx", m)).find("ir_version is 0"), std::string::npos);
}

TEST_F(BadInput, InconsistentShapesNameTheNode) {
  auto m = parse(model_text("g (float[N,3] a, float[N,5] b) => (y) {\n  y = Add (a, b)\n}"));
  m.mutable_graph()->mutable_node(0)->set_name("the_add");
  const auto msg = error_of(write_model("inconsistent.onnx", m));
  EXPECT_NE(msg.find("the_add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape inference failed"), std::string::npos) << msg;
}

// A Reshape whose target shape lives in an external data file.
onnx::ModelProto external_reshape(const std::string& location) {
  onnx::ModelProto m;
  auto st = onnx::OnnxParser::Parse(
      m, model_text("g (float[N,3,4,4] x) => (y) <int64[2] s = {0, 0}> {\n  y = Reshape (x, s)\n}").c_str());
  EXPECT_TRUE(st.IsOK());
  auto* s = m.mutable_graph()->mutable_initializer(0);
  s->clear_int64_data();
  s->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = s->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", "0");
  add("length", "16");
  return m;
}

TEST_F(BadInput, MissingExternalDataWhereValuesAreNeeded) {
  const auto msg = error_of(write_model("needs_data.onnx", external_reshape("needs_data.bin")));
  EXPECT_NE(msg.find("needs_data.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST_F(BadInput, ExternalDataIsReadWhenPresent) {
  const int64_t target[2] = {1, 48};
  write("shape.bin", std::string(reinterpret_cast<const char*>(target), sizeof target));
  const auto p = write_model("with_data.onnx", external_reshape("shape.bin"));
  auto r = process_model(p, ProcessOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(only((*r)[0], "Reshape").config.outputs[0].shape, (Shape{1, 48}));
}

TEST_F(BadInput, ShapeOnlyModelWithoutItsWeightsLoads) {
  // The committed zoo is exactly this: weights in external data whose file is absent.
  auto m =
      parse(model_text("g (float[N,8] x) => (y) <float[8,4] w = {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
                       "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}> {\n  y = MatMul (x, w)\n}"));
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("absent.bin");
  auto r = process_model(write_model("shape_only.onnx", m), ProcessOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(only((*r)[0], "MatMul").key, "MatMul|a=1x8|b=8x4|f32");
}

TEST_F(BadInput, FileOver64MiBLoads) {
  // 4096 x 4400 f32 weights embedded as raw data: 72 MB, past protobuf's 64 MiB default limit.
  auto m = parse(model_text("g (float[N,4096] x) => (y) <float[1] w = {0}> {\n  y = MatMul (x, w)\n}"));
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->clear_dims();
  w->add_dims(4096);
  w->add_dims(4400);
  w->set_raw_data(std::string(size_t{4096} * 4400 * 4, '\0'));
  const auto p = write_model("big.onnx", m);
  ASSERT_GT(fs::file_size(p), 64u << 20);
  auto r = process_model(p, ProcessOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(only((*r)[0], "MatMul").flops, int64_t{2} * 4400 * 4096);
}

TEST_F(BadInput, MissingPathAndNonOnnxFilesInAFolder) {
  auto missing = find_models({(dir_ / "nope.onnx").string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no such file or folder"), std::string::npos);

  write("README.txt", "not a model");
  write("notes.json", "{}");
  auto m = parse(model_text("g (float[N,4] x) => (y) {\n  y = Relu (x)\n}"));
  write_model("tiny.onnx", m);
  auto found = find_models({dir_.string()});
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].filename(), "tiny.onnx");
  // Named explicitly, a non-ONNX file is tried and fails with a clear error.
  const auto msg = error_of(dir_ / "README.txt");
  EXPECT_NE(msg.find("not an ONNX model"), std::string::npos) << msg;
}

TEST_F(BadInput, FolderNamedAsAFile) {
  auto r = process_model(dir_, ProcessOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace floorline::mp::test
