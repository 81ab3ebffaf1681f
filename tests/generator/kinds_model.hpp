// A small ONNX model with (at least) one node of every layer kind the oneDNN backend maps, and the
// fusion patterns the planner looks for. Weights are graph inputs: shapes are all that matter.
#pragma once

namespace floorline::gen::test {

inline constexpr const char* kKindsModel = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
kinds (float[1,8,10,10] x, float[16,8,3,3] w, float[16] b, float[8,4,3,3] wg, float[8,1,3,3] wd,
       float[1,4,12] x1, float[6,4,3] w1, float[1,2,5,6,6] x3, float[4,2,3,3,3] w3, float[8,4,2,2] wt,
       float[5,12] ga, float[7,12] gb, float[7] gc, float[12,5] gat, float[2,3,5,6] ma, float[6,4] mb,
       float[4] mbias, float[8] s, float[8] sh, float[8] mean, float[8] var, float[10] lns, float[10] lnb,
       float[1,8,1,1] bc, float[1,8,10,10] x2, float[2,4] rr, int64[2] rb, int64[1,3,10,10] si,
       float[1,3,10,10] su, float[1,4,5,2] gg, float[2,3,7,6] mk, float[4,6] mw)
    => (float o1, float o2, float o3, float o4, float o5, float o6, float o7, float o8, float o9, float o10,
        float o11, float o12, float o13, float o14, float o15, float o16, float o17, float o18, float o19,
        float o20, float o21, float o22, float o23, float o24, float o25, float o26, float o27, float o28,
        float o29, float o30, float o31, float o32, float o33, float o34, float o35, float o36, float o37,
        float o38, float o39, float o40, float o41, float o42, float o43, float o44, float o45, float o46a,
        float o46b, float o47, float o48, float o49, float o50, float o51, int64 o51i, float o52,
        float o53, float o54, float o55, float o56, float o57, float o58)
{
  c1 = Conv <pads = [1, 0, 2, 1], strides = [2, 1], dilations = [1, 2]> (x, w, b)
  o1 = Relu (c1)
  o2 = Conv <pads = [1, 1, 1, 1], group = 2> (x, wg)
  o3 = Conv <pads = [1, 1, 1, 1], group = 8> (x, wd)
  o4 = Conv <pads = [1, 1]> (x1, w1)
  o5 = Conv <pads = [1, 1, 1, 1, 1, 1]> (x3, w3)
  o6 = ConvTranspose <strides = [2, 2], pads = [0, 0, 1, 1], output_padding = [1, 1]> (x, wt)
  o7 = Gemm <transB = 1> (ga, gb, gc)
  o8 = Gemm <transA = 1> (gat, gb2)
  gb2 = Transpose <perm = [1, 0]> (gb)
  o9 = MatMul (ma, mb)
  mkt = Transpose <perm = [0, 1, 3, 2]> (mk)
  o57 = MatMul (ma, mkt)
  mwt = Transpose <perm = [1, 0]> (mw)
  o58 = MatMul (ma, mwt)
  mm = MatMul (ma, mb)
  mmb = Add (mm, mbias)
  o10 = Relu (mmb)
  o11 = BatchNormalization (x, s, sh, mean, var)
  o12 = LayerNormalization <axis = -1> (x, lns, lnb)
  o13 = InstanceNormalization (x, s, sh)
  o14 = LRN <size = 3> (x)
  o15 = Sigmoid (x)
  o16 = Tanh (x)
  o17 = HardSwish (x)
  o18 = HardSigmoid (x)
  lo = Constant <value = float {-0.5}> ()
  hi = Constant <value = float {0.5}> ()
  o19 = Clip (x, lo, hi)
  o20 = LeakyRelu <alpha = 0.1> (x)
  ax = Abs (x)
  o21 = Sqrt (ax)
  two = Constant <value = float {2.0}> ()
  o22 = Pow (x, two)
  o23 = Exp (x)
  o24 = Add (x, bc)
  o25 = Sub (x, bc)
  o26 = Mul (x, x2)
  o27 = Div (x, bc)
  o28 = Add (bc, x)
  o29 = Softmax <axis = 1> (x)
  o30 = LogSoftmax <axis = -1> (x)
  o31 = MaxPool <kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1> (x)
  o32 = AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1> (x)
  o33 = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  o34 = GlobalAveragePool (x)
  o35 = ReduceMean <axes = [2, 3], keepdims = 1> (x)
  o36 = Concat <axis = 1> (x, x2)
  o37 = Transpose <perm = [0, 2, 3, 1]> (x)
  st = Constant <value = int64[2] {1, 2}> ()
  en = Constant <value = int64[2] {7, 9}> ()
  sa = Constant <value = int64[2] {1, 3}> ()
  ss = Constant <value = int64[2] {2, 3}> ()
  o38 = Slice (x, st, en, sa, ss)
  pp = Constant <value = int64[8] {0, 0, 1, 2, 0, 0, 2, 1}> ()
  o39 = Pad (x, pp)
  sc = Constant <value = float[4] {1.0, 1.0, 2.0, 2.0}> ()
  o40 = Resize <mode = "nearest"> (x, , sc)
  o41 = Resize <mode = "linear", coordinate_transformation_mode = "half_pixel"> (x, , sc)
  c2 = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  c3 = Conv <pads = [1, 1, 1, 1]> (x2, w, b)
  r = Add (c2, c3)
  o42 = Relu (r)
  c4 = Conv <pads = [1, 1, 1, 1]> (x2, wd2)
  wd2 = Identity (w)
  o43 = Clip (c4, lo, hi)
  o44 = Erf (x)
  idx = Constant <value = int64[3] {0, 2, 1}> ()
  o45 = Gather <axis = 1> (x, idx)
  o46a, o46b = Split <axis = 1> (x)
  o47 = Floor (x)
  o48 = Resize <mode = "cubic"> (x, , sc)
  o49 = Sub (bc, x)
  o50 = Sum (x, x2, o15)
  k3 = Constant <value = int64[1] {3}> ()
  o51, o51i = TopK <axis = 1> (x, k3)
  gi = Constant <value = int64[3,2] {0, 1, 0, 7, 0, 3}> ()
  o52 = GatherND (x, gi)
  o53 = RoiAlign <output_height = 3, output_width = 3, sampling_ratio = 2, spatial_scale = 0.5> (x, rr, rb)
  o54 = ScatterElements <axis = 1, reduction = "add"> (x, si, su)
  o55 = GridSample (x, gg)
  gr2 = Constant <value = float {1.4142135}> ()
  gone = Constant <value = float {1.0}> ()
  ghalf = Constant <value = float {0.5}> ()
  gt = Div (x, gr2)
  gu = Erf (gt)
  gv = Add (gu, gone)
  gw = Mul (x, gv)
  o56 = Mul (gw, ghalf)
}
)onnx";

}  // namespace floorline::gen::test
