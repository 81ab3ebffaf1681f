// Hostile input: each case that crashed, hung, leaked or was wrongly accepted, built
// here, gives its exact one-line error naming the file (and the node), and the process survives.
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include "floorline/common/utf8.hpp"
#include "floorline/model_processor/zoo.hpp"
#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

namespace fs = std::filesystem;

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("floorline_hostile_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "models");
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    const auto p = dir_ / "models" / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  fs::path write_model(const std::string& name, const onnx::ModelProto& m) {
    return write(name, m.SerializeAsString());
  }
  static onnx::ModelProto parse(const std::string& graph, int opset = 17) {
    onnx::ModelProto m;
    auto st = onnx::OnnxParser::Parse(m, model_text(graph, opset).c_str());
    EXPECT_TRUE(st.IsOK()) << st.ErrorMessage();
    return m;
  }
  // The error of processing `m` written as `name`: one line, starting with the file's path.
  std::string error_of(const std::string& name, const onnx::ModelProto& m, ProcessOptions o = {}) {
    const auto p = write_model(name, m);
    auto r = process_model(p, o);
    EXPECT_FALSE(r.ok()) << name << " should fail";
    if (r.ok()) return "";
    const std::string& msg = r.error().message;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line error: " << msg;
    EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << "error does not start with the file name: " << msg;
    EXPECT_TRUE(is_valid_utf8(msg));
    return msg.substr(p.string().size() + 2);
  }

  fs::path dir_;
};

// A Conv on a graph input; the first dims of x and the conv attributes are the parameters.
onnx::ModelProto conv_model(const std::string& attrs, const std::string& x = "float[N,3,8,8] x",
                            const std::string& w = "float[4,3,3,3] w") {
  onnx::ModelProto m;
  const auto text = model_text(fmt::format("g ({}, {}) => (y) {{\n  y = Conv <{}> (x, w)\n}}", x, w, attrs));
  EXPECT_TRUE(onnx::OnnxParser::Parse(m, text.c_str()).IsOK()) << text;
  // w as an initializer (shape only, as in the zoo), so its dims are known before inference.
  auto* g = m.mutable_graph();
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (const auto& d : g->input(1).type().tensor_type().shape().dim()) t->add_dims(d.dim_value());
  g->mutable_node(0)->set_name("the_conv");
  return m;
}

// --- dimensions and ranks that crashed ONNX 1.12's shape inference -------------------------------

TEST_F(Hostile, GraphInputDimensionsOutOfRange) {
  for (int64_t bad : {int64_t{-5}, INT64_MAX, int64_t{1000000000000}}) {
    auto m = parse("g (float[N,3,8,8] x) => (y) {\n  y = Relu (x)\n}");
    m.mutable_graph()
        ->mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(2)
        ->set_dim_value(bad);
    EXPECT_EQ(
        error_of("dim.onnx", m),
        fmt::format("graph input 'x' has dimension {} at axis 2; dimensions must be 0..2147483648", bad));
  }
}

// An empty graph input is legal ONNX (torchvision's maskrcnn export has one; a decoder's empty past).
TEST_F(Hostile, AGraphInputOfZeroSizeIsAnEmptyTensor) {
  auto m = parse("g (float[N,3,0,8] x) => (y) {\n  y = Relu (x)\n}");
  auto r = process_model(write_model("zero.onnx", m), ProcessOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Layer& relu = (*r)[0].layers.at(0);
  EXPECT_EQ(relu.config.outputs[0].shape, (Shape{1, 3, 0, 8}));
  EXPECT_EQ(relu.flops, 0);
}

TEST_F(Hostile, RankNine) {
  auto m = parse("g (float[N,1,1,1,1,1,1,1,1] x) => (y) {\n  y = Relu (x)\n}");
  EXPECT_EQ(error_of("rank9.onnx", m), "graph input 'x' has rank 9; Floorline accepts ranks up to 8");
}

TEST_F(Hostile, ConvOnARankOneInput) {
  EXPECT_EQ(error_of("rank1.onnx", conv_model("kernel_shape = [3, 3]", "float[N] x")),
            "node the_conv (Conv) input 'x' has rank 1; Conv needs rank 3 or more");
}

TEST_F(Hostile, ConvWeightsOfRankTen) {
  EXPECT_EQ(error_of("w10.onnx", conv_model("group = 1", "float[N,3,8,8] x", "float[4,3,3,3,1,1,1,1,1,1] w")),
            "initializer 'w' has rank 10; Floorline accepts ranks up to 8");
}

// --- convolution attributes ------------------------------------------------------------------------

TEST_F(Hostile, ZeroStrideWithSameUpper) {
  // SIGFPE in the pad resolution before; ONNX's own inference divides by it too.
  EXPECT_EQ(error_of("stride0.onnx", conv_model("auto_pad = \"SAME_UPPER\", strides = [0, 1]")),
            "node the_conv (Conv) has strides = 0; each must be 1..2147483648");
  auto pool = parse(
      "g (float[N,3,8,8] x) => (y) {\n  y = MaxPool <kernel_shape = [2, 2], strides = [1, 0], "
      "auto_pad = \"SAME_UPPER\"> (x)\n}");
  EXPECT_EQ(error_of("pool_stride0.onnx", pool),
            "node MaxPool_0 (MaxPool) has strides = 0; each must be 1..2147483648");
}

TEST_F(Hostile, GroupsAndPads) {
  EXPECT_EQ(error_of("group0.onnx", conv_model("group = 0")),
            "node the_conv (Conv) has group = 0; each must be 1..2147483648");
  EXPECT_EQ(error_of("group-1.onnx", conv_model("group = -1")),
            "node the_conv (Conv) has group = -1; each must be 1..2147483648");
  EXPECT_EQ(error_of("group2e40.onnx", conv_model("group = 1099511627776")),
            "node the_conv (Conv) has group = 1099511627776; each must be 1..2147483648");
  EXPECT_EQ(error_of("group3.onnx", conv_model("group = 3")),
            "node the_conv (Conv) has group 3, which does not divide the 4 output channels of weights 'w'");
  EXPECT_EQ(error_of("pads.onnx", conv_model("pads = [0, -1, 0, 0]")),
            "node the_conv (Conv) has pads = -1; each must be 0..2147483648");
  EXPECT_EQ(error_of("kernel.onnx", conv_model("kernel_shape = [3, 100000000000]")),
            "node the_conv (Conv) has kernel_shape = 100000000000; each must be 1..2147483648");
  EXPECT_EQ(error_of("strides_len.onnx", conv_model("strides = [1, 1, 1]")),
            "node the_conv (Conv) has 3 values in strides; its 2-D kernel needs 2");
}

TEST_F(Hostile, InputChannelsMustMatchWeightsAndGroup) {
  // 3 input channels, weights for 2 groups of 3: 6 expected.
  EXPECT_EQ(error_of("channels.onnx", conv_model("group = 2", "float[N,3,8,8] x", "float[4,3,3,3] w")),
            "node the_conv (Conv) input 'x' has 3 channels but its weights 'w' and group 2 take 6");
}

TEST_F(Hostile, KernelLargerThanItsInputIsRefusedNotBlamedOnWeights) {
  // A 100000-wide kernel gives a negative output width; before it was blamed on the weight file.
  const auto msg =
      error_of("wide.onnx", conv_model("group = 1", "float[N,3,8,8] x", "float[4,3,3,100000] w"));
  EXPECT_NE(msg.find("the_conv"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("external data"), std::string::npos) << msg;
}

// --- graph structure ---------------------------------------------------------------------------------

TEST_F(Hostile, SelfLoop) {
  auto m = parse("g (float[N,4] x) => (y) {\n  y = Relu (x)\n}");
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");
  EXPECT_EQ(error_of("self.onnx", m), "node Relu_0 (Relu) consumes its own output 'y'");
}

TEST_F(Hostile, DuplicatedNodeList) {
  auto m = parse("g (float[N,4] x) => (y) {\n  a = Relu (x)\n  y = Sigmoid (a)\n}");
  auto* g = m.mutable_graph();
  const auto nodes = g->node();
  for (const auto& n : nodes) *g->add_node() = n;
  EXPECT_EQ(error_of("twice.onnx", m),
            "node Relu_2 (Relu) output 'a' is already the output of node Relu_0 (Relu); a value may be "
            "produced once");
}

TEST_F(Hostile, Cycle) {
  auto m = parse("g (float[N,4] x) => (y) {\n  a = Add (x, b)\n  b = Relu (a)\n  y = Sigmoid (b)\n}");
  EXPECT_EQ(error_of("cycle.onnx", m), "graph has a cycle through node Add_0 (Add)");
}

TEST_F(Hostile, UndefinedInput) {
  // A dangling input crashed ONNX 1.12's shape inference (found by the campaign).
  auto m = parse("g (float[N,4] x) => (y) {\n  y = Add (x, x)\n}");
  m.mutable_graph()->mutable_node(0)->set_input(1, "nowhere");
  EXPECT_EQ(error_of("dangling.onnx", m),
            "node Add_0 (Add) reads 'nowhere', which no node, graph input or initializer provides");
}

TEST_F(Hostile, OpsetZeroOrMissing) {
  auto m = parse("g (float[N,4] x) => (y) {\n  y = Relu (x)\n}");
  m.mutable_opset_import(0)->set_version(0);
  EXPECT_EQ(error_of("opset0.onnx", m),
            "model declares opset 0 for the default ONNX domain; opsets start at 1");
  m.mutable_opset_import(0)->set_version(17);
  m.mutable_opset_import(0)->set_domain("com.example");
  EXPECT_EQ(error_of("noopset.onnx", m),
            "model uses ops of the default ONNX domain but declares no opset for it");
}

// --- overflow -----------------------------------------------------------------------------------------

TEST_F(Hostile, FlopsOverflowIsAnErrorNamingTheNode) {
  // 2 · 2^21 · 2^21 · 2^21 = 2^64 FLOPs.
  auto m = parse("g (float[2097152,2097152] a, float[2097152,2097152] b) => (y) {\n  y = MatMul (a, b)\n}");
  EXPECT_EQ(error_of("matmul.onnx", m),
            "node MatMul_0 (MatMul): its FLOPs do not fit in 64 bits "
            "(MatMul|a=2097152x2097152|b=2097152x2097152|f32)");
}

TEST_F(Hostile, ElementCountOverflow) {
  // [1, 3, 2^31, 2^31] is 3·2^62 elements: more than int64 holds.
  auto m = parse("g (float[N,3,2147483648,2147483648] x) => (y) {\n  y = Relu (x)\n}");
  EXPECT_EQ(error_of("huge.onnx", m),
            "node Relu_0 (Relu) output 'y' has shape 1x3x2147483648x2147483648, more than 576460752303423488 "
            "elements");
}

TEST_F(Hostile, TransposeAfterAnOverflowingReshape) {
  // Constant folding multiplied the target dims without a check and transposed into wild memory.
  auto m = parse(
      "g (float[N,2] x) => (y, t) <int64[2] d = {1, 2}, int64[3] s = {4611686018427387904, 4, 1}> {\n"
      "  r = Reshape (d, s)\n  t = Transpose <perm = [2, 0, 1]> (r)\n  y = Relu (x)\n}");
  EXPECT_EQ(
      error_of("reshape.onnx", m),
      "node Reshape_0 (Reshape) output 'r' has shape 4611686018427387904x4x1, more than 576460752303423488 "
      "elements");
}

TEST_F(Hostile, IntegerDivisionEdgesFoldWithoutATrap) {
  // INT64_MIN / -1 and x / 0 raised SIGFPE while folding at load time.
  auto ir = process_ok(model_text(
      "g (float[N,4] x) => (y) <int64[1] a = {-9223372036854775807}, int64[1] m1 = {-1}, int64[1] z = {0}, "
      "int64[1] one = {1}> {\n"
      "  amin = Sub (a, one)\n  q = Div (amin, m1)\n  r = Div (a, z)\n  s = Mod (amin, m1)\n"
      "  qs = Concat <axis = 0> (q, r, s)\n  y = Relu (x)\n}"));
  ASSERT_EQ(ir.size(), 1u);
  EXPECT_TRUE(only(ir[0], "Concat").folded);
}

// --- names --------------------------------------------------------------------------------------------

TEST_F(Hostile, InvalidUtf8InNamesIsReplaced) {
  auto m = parse("g (float[N,4] x) => (y) {\n  a = Relu (x)\n  y = Sigmoid (a)\n}");
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_name("relu\xff\xfe");
  g->mutable_node(0)->set_output(0, "a\xc3(");
  g->mutable_node(1)->set_input(0, "a\xc3(");
  auto r = process_model(write_model("names.onnx", m), ProcessOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& relu = only((*r)[0], "Relu");
  EXPECT_EQ(relu.name, "relu\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(relu.output_names[0], "a\xEF\xBF\xBD(");
  EXPECT_EQ(only((*r)[0], "Sigmoid").preds, (std::vector<int>{relu.index}));  // wiring kept
  // An op type of invalid bytes: an unknown op whose error or warning is valid UTF-8.
  g->mutable_node(1)->set_op_type("Sig\xffmoid");
  auto u = process_model(write_model("op.onnx", m), ProcessOptions{});
  ASSERT_TRUE(u.ok()) << u.error().message;
  for (const auto& w : (*u)[0].warnings) EXPECT_TRUE(is_valid_utf8(w)) << w;
  for (const auto& l : (*u)[0].layers) EXPECT_TRUE(is_valid_utf8(l.key)) << l.key;
}

// --- external data ------------------------------------------------------------------------------------

// A Reshape whose target shape is an external-data initializer at `location`.
onnx::ModelProto external_reshape_at(const std::string& location, const std::string& offset = "0",
                                     const std::string& length = "16") {
  onnx::ModelProto m;
  EXPECT_TRUE(
      onnx::OnnxParser::Parse(
          m,
          model_text("g (float[N,3,4,4] x) => (y) <int64[2] s = {0, 0}> {\n  y = Reshape (x, s)\n}").c_str())
          .IsOK());
  auto* s = m.mutable_graph()->mutable_initializer(0);
  s->clear_int64_data();
  s->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair{"location", location}, {"offset", offset}, {"length", length}}) {
    auto* e = s->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  return m;
}

TEST_F(Hostile, ExternalDataOutsideTheFolderIsRefusedUnread) {
  // /etc/passwd's first bytes came back as Reshape dims ("3475222254926655346x..." is "root:x:0").
  const std::string secret = "root:x:0:0:secret";
  std::ofstream(dir_ / "secret.bin", std::ios::binary) << secret;
  fs::create_symlink(dir_ / "secret.bin", dir_ / "models" / "link.bin");
  fs::create_directories(dir_ / "models" / "sub");
  const auto abs = (dir_ / "secret.bin").string();
  const std::pair<std::string, std::string> cases[] = {
      {abs, "tensor 's': external data location '" + abs +
                "' is an absolute path; only files inside the model's folder are read"},
      {"../secret.bin",
       "tensor 's': external data location '../secret.bin' leaves the model's folder; only files inside it "
       "are "
       "read"},
      {"sub/../../secret.bin",
       "tensor 's': external data location 'sub/../../secret.bin' leaves the model's folder; only files "
       "inside "
       "it are read"},
      {"link.bin",
       "tensor 's': external data location 'link.bin' resolves outside the model's folder (a symbolic link); "
       "only files inside it are read"},
  };
  for (const auto& [location, expected] : cases) {
    const auto msg = error_of("escape.onnx", external_reshape_at(location));
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    EXPECT_EQ(msg.find("root"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("3475222254926655346"), std::string::npos) << msg;
  }
}

TEST_F(Hostile, ExternalDataMustBeARegularFileWithinItsSize) {
  ASSERT_EQ(::mkfifo((dir_ / "models" / "fifo").c_str(), 0600), 0);
  EXPECT_NE(error_of("fifo.onnx", external_reshape_at("fifo"))
                .find("external data location 'fifo' is not a regular file"),
            std::string::npos);  // and it returned: a FIFO no longer blocks the open
  write("short.bin", std::string(8, '\0'));
  EXPECT_NE(error_of("short.onnx", external_reshape_at("short.bin"))
                .find("external data file 'short.bin' is shorter than offset 0 + length 16"),
            std::string::npos);
  write("ok.bin", std::string(16, '\0'));
  EXPECT_NE(error_of("huge.onnx", external_reshape_at("ok.bin", "0", "3000000000"))
                .find("external data file 'ok.bin' is shorter than offset 0 + length 3000000000"),
            std::string::npos);
  EXPECT_NE(error_of("neg.onnx", external_reshape_at("ok.bin", "-5"))
                .find("external data offset '-5' is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of("wrap.onnx", external_reshape_at("ok.bin", "9223372036854775800"))
                .find("is shorter than offset 9223372036854775800 + length 16"),
            std::string::npos);
}

TEST_F(Hostile, ExternalDataBudgetPerModel) {
  const int64_t target[2] = {1, 48};
  write("shape.bin", std::string(reinterpret_cast<const char*>(target), sizeof target));
  ProcessOptions o;
  o.max_external_bytes = 8;
  EXPECT_NE(error_of("budget.onnx", external_reshape_at("shape.bin"), o)
                .find("external data of 16 bytes exceeds what one model may load"),
            std::string::npos);
  o.max_external_bytes = 16;
  auto r = process_model(write_model("fits.onnx", external_reshape_at("shape.bin")), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(only((*r)[0], "Reshape").config.outputs[0].shape, (Shape{1, 48}));
}

TEST_F(Hostile, ModelPathThatIsAFifoDoesNotBlock) {
  ASSERT_EQ(::mkfifo((dir_ / "models" / "m.onnx").c_str(), 0600), 0);
  auto r = process_model(dir_ / "models" / "m.onnx", ProcessOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
}

// --- isolation ---------------------------------------------------------------------------------------

TEST_F(Hostile, ACrashInShapeInferenceBecomesThatModelsError) {
  // A zoo model with one Conv's pads changed to 100000: ONNX 1.12's InferShapes dereferences a bad
  // pointer (SIGSEGV) on it. Found by bench/hostile_campaign.py.
  const fs::path crasher =
      fs::path(FLOORLINE_SOURCE_DIR) / "tests/model_processor/hostile/onnx_shape_inference_segv.onnx";
  auto r = process_model(crasher, ProcessOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, crasher.string() + ": ONNX shape inference crashed (SIGSEGV)");
  // The process goes on: the next model loads.
  EXPECT_TRUE(
      process_model(fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo/alexnet.onnx", ProcessOptions{}).ok());
}

TEST_F(Hostile, OneWorkerServesEveryModelUntilOneCrashesIt) {
  const fs::path zoo = fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo";
  ASSERT_TRUE(process_model(zoo / "alexnet.onnx", ProcessOptions{}).ok());
  const int forks = inference_worker_forks();
  EXPECT_GE(forks, 1);
  for (const char* name : {"resnet18.onnx", "squeezenet1_1.onnx", "alexnet.onnx"})
    EXPECT_TRUE(process_model(zoo / name, ProcessOptions{}).ok()) << name;
  EXPECT_EQ(inference_worker_forks(), forks);
  const fs::path crasher =
      fs::path(FLOORLINE_SOURCE_DIR) / "tests/model_processor/hostile/onnx_shape_inference_segv.onnx";
  EXPECT_FALSE(process_model(crasher, ProcessOptions{}).ok());
  auto r = process_model(zoo / "resnet18.onnx", ProcessOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(inference_worker_forks(), forks + 1);

  // Pipelined (the next models are read ahead while the workers infer): results in order, each
  // crash still that model's error (the second one while the reader is still reading ahead: the
  // worker is forked again), the same layers as one at a time.
  const std::vector<fs::path> paths = {zoo / "alexnet.onnx",
                                       crasher,
                                       dir_ / "missing.onnx",
                                       zoo / "resnet18.onnx",
                                       crasher,
                                       zoo / "squeezenet1_1.onnx",
                                       zoo / "mobilenet_v2.onnx",
                                       zoo / "alexnet.onnx"};
  std::vector<std::string> got;
  int before = inference_worker_forks();
  int second_before = second_inference_worker_forks();
  ProcessOptions one;
  one.inference_workers = 1;
  ASSERT_EQ(inference_worker_count(paths.size(), one), 1);
  process_models(paths, one, [&](size_t k, Result<std::vector<ModelIR>> m) {
    got.push_back(fmt::format("{} {}", k, m ? std::to_string((*m)[0].total_flops()) : m.error().message));
  });
  EXPECT_EQ(inference_worker_forks(), before + 2);            // one new worker after each crash
  EXPECT_EQ(second_inference_worker_forks(), second_before);  // no second worker
  // Two workers at once (as on a machine with four CPUs or more): the same results, in order.
  ProcessOptions two;
  two.inference_workers = 2;
  ASSERT_EQ(inference_worker_count(paths.size(), two), 2);
  std::vector<std::string> got_two;
  before = inference_worker_forks();
  second_before = second_inference_worker_forks();
  process_models(paths, two, [&](size_t k, Result<std::vector<ModelIR>> m) {
    got_two.push_back(fmt::format("{} {}", k, m ? std::to_string((*m)[0].total_flops()) : m.error().message));
  });
  // The process's worker again (the call before let it go once no model was left) and the second
  // worker; a crashed worker is forked again only if a model is still left for it, which depends on
  // which worker answered first: 0 to 2 more.
  EXPECT_GE(inference_worker_forks(), before + 2);
  EXPECT_LE(inference_worker_forks(), before + 2 + 2);
  EXPECT_GE(second_inference_worker_forks(), second_before + 1);  // the second worker did run
  EXPECT_EQ(got_two, got);
  std::vector<std::string> want;
  for (size_t k = 0; k < paths.size(); ++k) {
    auto m = process_model(paths[k], ProcessOptions{});
    want.push_back(fmt::format("{} {}", k, m ? std::to_string((*m)[0].total_flops()) : m.error().message));
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(want[1], "1 " + crasher.string() + ": ONNX shape inference crashed (SIGSEGV)");
  EXPECT_EQ(want[4], "4 " + crasher.string() + ": ONNX shape inference crashed (SIGSEGV)");
}

// The worker reports a model over its memory cap by catching std::bad_alloc: the executables'
// operator new must throw it where memory runs out (mimalloc's own would abort the process:
// common/src/allocator.cpp).
TEST(Allocator, OperatorNewThrowsWhenMemoryRunsOut) {
  volatile size_t huge = size_t{1} << 62;
  EXPECT_THROW(
      {
        std::unique_ptr<char[]> p(new char[huge]);
        p[0] = 1;
      },
      std::bad_alloc);
}

TEST_F(Hostile, ShapeInferenceMemoryAndTimeLimits) {
  // A model whose inference needs more than the budget: ConstantOfShape folding of 2^26 elements
  // (256 MiB) at an 8 MiB cap on what the child may add. The cap counts address space from the
  // child's start, which a parent that freed a lot (the Materialize tests, run before in one
  // process) leaves mapped: the fold is made far larger than any such reserve.
  auto m = parse(
      "g (float[N,4] x) => (y) <int64[1] n = {67108864}> {\n  c = ConstantOfShape (n)\n  s = Shape (c)\n"
      "  y = Relu (x)\n}");
  ProcessOptions o;
  o.max_folded_elements = int64_t{1} << 27;
  o.max_folded_total = int64_t{1} << 27;
  o.inference_memory_mib = 8;
  EXPECT_EQ(error_of("memory.onnx", m, o), "shape inference exceeded 8 MiB");
  o.inference_memory_mib = 768;
  o.inference_timeout_s = 1e-6;
  EXPECT_EQ(error_of("time.onnx", m, o), "shape inference did not finish in 1e-06 s");
}

TEST_F(Hostile, TwoWorkersKeepTheLimitsPerModel) {
  // With two workers at once, each model still gets its own time limit and its own error, in the
  // order of the paths; the models after them still get workers.
  const fs::path zoo = fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo";
  const std::vector<fs::path> paths = {zoo / "alexnet.onnx", zoo / "resnet18.onnx",
                                       zoo / "squeezenet1_1.onnx"};
  ProcessOptions o;
  o.inference_workers = 2;
  o.inference_timeout_s = 1e-6;
  std::vector<std::string> got;
  const int second_before = second_inference_worker_forks();
  process_models(paths, o, [&](size_t k, Result<std::vector<ModelIR>> m) {
    got.push_back(fmt::format("{} {}", k, m ? "ok" : m.error().message));
  });
  EXPECT_GE(second_inference_worker_forks(), second_before + 1);  // a second worker took models
  ASSERT_EQ(got.size(), paths.size());
  for (size_t k = 0; k < paths.size(); ++k)
    EXPECT_EQ(got[k], fmt::format("{} {}: shape inference did not finish in 1e-06 s", k, paths[k].string()));
  o.inference_timeout_s = 60;
  got.clear();
  process_models(paths, o, [&](size_t k, Result<std::vector<ModelIR>> m) {
    got.push_back(fmt::format("{} {}", k, m ? std::to_string((*m)[0].total_flops()) : m.error().message));
  });
  std::vector<std::string> want;
  for (size_t k = 0; k < paths.size(); ++k) {
    auto m = process_model(paths[k], ProcessOptions{});
    want.push_back(fmt::format("{} {}", k, m ? std::to_string((*m)[0].total_flops()) : m.error().message));
  }
  EXPECT_EQ(got, want);
}

TEST_F(Hostile, InProcessInferenceGivesTheSameResults) {
  ProcessOptions iso, in;
  in.isolate = false;
  iso.batches = in.batches = {1, 4};
  const auto path = fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo/swin_t.onnx";
  auto a = process_model(path, iso), b = process_model(path, in);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_EQ(a->size(), b->size());
  for (size_t k = 0; k < a->size(); ++k) {
    ASSERT_EQ((*a)[k].layers.size(), (*b)[k].layers.size());
    EXPECT_EQ((*a)[k].total_flops(), (*b)[k].total_flops());
    for (size_t j = 0; j < (*a)[k].layers.size(); ++j)
      EXPECT_EQ((*a)[k].layers[j].key, (*b)[k].layers[j].key);
  }
}

}  // namespace
}  // namespace floorline::mp::test
