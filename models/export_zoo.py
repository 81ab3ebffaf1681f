#!/usr/bin/python3
"""Export the Floorline model zoo from torchvision architectures to ONNX.

Run with Debian's interpreter (/usr/bin/python3: python3-torch 1.13, python3-torchvision 0.14,
python3-onnx). Weights are random (weights=None, weights_backbone=None): nothing is downloaded.

  /usr/bin/python3 models/export_zoo.py                      # shape-only zoo -> models/zoo/
  /usr/bin/python3 models/export_zoo.py --full DIR           # full-weight copies -> DIR (not committed)
  /usr/bin/python3 models/export_zoo.py --only resnet18,vgg16

Every model is exported at opset 17 with a symbolic batch dimension ("N") on its input and
output. A shape-only copy moves every tensor larger than 1 KiB to external data and then drops the
data file: the graph keeps each initializer's dims and dtype, and Floorline needs nothing more.
"""
import argparse
import hashlib
import os
import sys

import onnx
import torch
import torchvision
from onnx import external_data_helper
from torchvision import models as tvm
from torchvision.models import segmentation as tvs
from torchvision.models import video as tvv
from torchvision.models import detection as tvd

from export_common import run_exports

OPSET = 17


# --- quantized (QDQ) models -------------------------------------------------------------
def resnet18_qdq():
    """torchvision's quantizable ResNet-18, eager-mode post-training quantization (fbgemm qconfig:
    u8 activations with zero points, s8 weights with per-channel scales), calibrated on random
    images. PyTorch 1.13 exports the quantized model as QDQ: QuantizeLinear -> Cast -> DequantizeLinear
    around every Conv (+ Relu), Add (+ Relu), MaxPool, GlobalAveragePool and Gemm, with the int8
    weights and int32 biases behind their own DequantizeLinear."""
    from torchvision.models import quantization as tvq
    net = tvq.resnet18(weights=None, quantize=False).eval()
    net.fuse_model()
    net.qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
    torch.ao.quantization.prepare(net, inplace=True)
    with torch.no_grad():
        net(torch.randn(4, *IMAGE))
    torch.ao.quantization.convert(net, inplace=True)
    return net


def bert_base_encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072,
                                             dropout=0.1, activation="gelu", batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)


class SegmentationOut(torch.nn.Module):
    """torchvision segmentation models return a dict; export its 'out' tensor."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


# --- recurrent models built from torch.nn, and MaxViT (Einsum attention).
class LstmLanguageModel(torch.nn.Module):
    """A word-level LSTM language model (the PyTorch word_language_model example's shape):
    embedding 10000 x 256, a 2-layer LSTM of 256 units, a linear decoder to the vocabulary."""

    def __init__(self, vocab=10000, width=256, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.lstm = torch.nn.LSTM(width, width, num_layers=layers, batch_first=True)
        self.decode = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        y, _ = self.lstm(self.embed(tokens))
        return self.decode(y)


class GruKeywordSpotter(torch.nn.Module):
    """A keyword-spotting model on 49 frames of 40 MFCCs (Speech Commands' 1 s at 20 ms hops):
    a 2-layer bidirectional GRU of 64 units, the last frame classified into 12 keywords."""

    def __init__(self, features=40, width=64, keywords=12):
        super().__init__()
        self.gru = torch.nn.GRU(features, width, num_layers=2, batch_first=True, bidirectional=True)
        self.classify = torch.nn.Linear(2 * width, keywords)

    def forward(self, mfcc):
        y, _ = self.gru(mfcc)
        return self.classify(y[:, -1, :])


# Models whose input is not a float tensor: a function making one example input (batch 1).
INPUTS = {"lstm_lm": lambda: torch.randint(0, 10000, (1, 35))}
# ---

IMAGE = (3, 224, 224)
# name: (constructor text, builder, input shape without batch)
ZOO = {
    "alexnet": ("torchvision.models.alexnet(weights=None)", lambda: tvm.alexnet(weights=None), IMAGE),
    "vgg11": ("torchvision.models.vgg11(weights=None)", lambda: tvm.vgg11(weights=None), IMAGE),
    "vgg16": ("torchvision.models.vgg16(weights=None)", lambda: tvm.vgg16(weights=None), IMAGE),
    "vgg16_bn": ("torchvision.models.vgg16_bn(weights=None)", lambda: tvm.vgg16_bn(weights=None), IMAGE),
    "resnet18": ("torchvision.models.resnet18(weights=None)", lambda: tvm.resnet18(weights=None), IMAGE),
    "resnet34": ("torchvision.models.resnet34(weights=None)", lambda: tvm.resnet34(weights=None), IMAGE),
    "resnet50": ("torchvision.models.resnet50(weights=None)", lambda: tvm.resnet50(weights=None), IMAGE),
    "resnet101": ("torchvision.models.resnet101(weights=None)", lambda: tvm.resnet101(weights=None), IMAGE),
    "resnext50_32x4d": ("torchvision.models.resnext50_32x4d(weights=None)",
                        lambda: tvm.resnext50_32x4d(weights=None), IMAGE),
    "wide_resnet50_2": ("torchvision.models.wide_resnet50_2(weights=None)",
                        lambda: tvm.wide_resnet50_2(weights=None), IMAGE),
    "squeezenet1_0": ("torchvision.models.squeezenet1_0(weights=None)",
                      lambda: tvm.squeezenet1_0(weights=None), IMAGE),
    "squeezenet1_1": ("torchvision.models.squeezenet1_1(weights=None)",
                      lambda: tvm.squeezenet1_1(weights=None), IMAGE),
    "densenet121": ("torchvision.models.densenet121(weights=None)", lambda: tvm.densenet121(weights=None), IMAGE),
    "inception_v3": ("torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)",
                     lambda: tvm.inception_v3(weights=None, aux_logits=False, init_weights=True), (3, 299, 299)),
    "googlenet": ("torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)",
                  lambda: tvm.googlenet(weights=None, aux_logits=False, init_weights=True), IMAGE),
    "mobilenet_v2": ("torchvision.models.mobilenet_v2(weights=None)", lambda: tvm.mobilenet_v2(weights=None), IMAGE),
    "mobilenet_v3_small": ("torchvision.models.mobilenet_v3_small(weights=None)",
                           lambda: tvm.mobilenet_v3_small(weights=None), IMAGE),
    "mobilenet_v3_large": ("torchvision.models.mobilenet_v3_large(weights=None)",
                           lambda: tvm.mobilenet_v3_large(weights=None), IMAGE),
    "shufflenet_v2_x1_0": ("torchvision.models.shufflenet_v2_x1_0(weights=None)",
                           lambda: tvm.shufflenet_v2_x1_0(weights=None), IMAGE),
    "mnasnet1_0": ("torchvision.models.mnasnet1_0(weights=None)", lambda: tvm.mnasnet1_0(weights=None), IMAGE),
    "efficientnet_b0": ("torchvision.models.efficientnet_b0(weights=None)",
                        lambda: tvm.efficientnet_b0(weights=None), IMAGE),
    "efficientnet_v2_s": ("torchvision.models.efficientnet_v2_s(weights=None)",
                          lambda: tvm.efficientnet_v2_s(weights=None), (3, 384, 384)),
    "regnet_y_400mf": ("torchvision.models.regnet_y_400mf(weights=None)",
                       lambda: tvm.regnet_y_400mf(weights=None), IMAGE),
    "regnet_x_400mf": ("torchvision.models.regnet_x_400mf(weights=None)",
                       lambda: tvm.regnet_x_400mf(weights=None), IMAGE),
    "convnext_tiny": ("torchvision.models.convnext_tiny(weights=None)", lambda: tvm.convnext_tiny(weights=None), IMAGE),
    "vit_b_16": ("torchvision.models.vit_b_16(weights=None)", lambda: tvm.vit_b_16(weights=None), IMAGE),
    "swin_t": ("torchvision.models.swin_t(weights=None)", lambda: tvm.swin_t(weights=None), IMAGE),
    "fcn_resnet50": ("torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False)",
                     lambda: SegmentationOut(tvs.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False)),
                     (3, 520, 520)),
    "deeplabv3_mobilenet_v3_large": (
        "torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False)",
        lambda: SegmentationOut(tvs.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False)),
        (3, 520, 520)),
    "lraspp_mobilenet_v3_large": (
        "torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)",
        lambda: SegmentationOut(tvs.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)),
        (3, 520, 520)),
    "r3d_18": ("torchvision.models.video.r3d_18(weights=None)", lambda: tvv.r3d_18(weights=None), (3, 16, 112, 112)),
    "r2plus1d_18": ("torchvision.models.video.r2plus1d_18(weights=None)",
                    lambda: tvv.r2plus1d_18(weights=None), (3, 16, 112, 112)),
    "bert_base_encoder": (
        "torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, "
        "dim_feedforward=3072, activation='gelu', batch_first=True), num_layers=12)",
        bert_base_encoder, (128, 768)),
    # --- quantized (QDQ) models ---
    "resnet18_qdq": ("torchvision.models.quantization.resnet18(weights=None, quantize=False), fused, "
                     "fbgemm post-training quantization calibrated on random images", resnet18_qdq, IMAGE),
    # --- Einsum attention and recurrent models
    "maxvit_t": ("torchvision.models.maxvit_t(weights=None)", lambda: tvm.maxvit_t(weights=None), IMAGE),
    "lstm_lm": ("LstmLanguageModel(vocab=10000, width=256, layers=2) (torch.nn, models/export_zoo.py)",
                LstmLanguageModel, (35,)),
    "gru_kws": ("GruKeywordSpotter(features=40, width=64, keywords=12) (torch.nn, models/export_zoo.py)",
                GruKeywordSpotter, (49, 40)),
    # ---
}


def constants_to_initializers(model):
    """PyTorch exports a quantized model's int8 weights as Constant nodes; as initializers they go
    to external data like any other weight (and the shape-only copy drops them)."""
    graph = model.graph
    keep = []
    for node in graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value" \
                and len(node.attribute[0].t.raw_data) > 1024:
            t = onnx.TensorProto()
            t.CopyFrom(node.attribute[0].t)
            t.name = node.output[0]
            graph.initializer.append(t)
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)


# --- detection: data-dependent output sizes (NonZero, NonMaxSuppression, TopK) -----------
class DetectionOut(torch.nn.Module):
    """torchvision detection models take a list of images and return a list of dicts: export one
    image's boxes, scores and labels. Traced at batch 1 (the per-image loop is unrolled), so the
    model's batch size is fixed at 1."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        out = self.net([x[0]])[0]
        return out["boxes"], out["scores"], out["labels"]


DETECTION = {
    "ssdlite320_mobilenet_v3_large": (
        "torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)",
        lambda: DetectionOut(tvd.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)),
        (3, 320, 320)),
}
ZOO.update(DETECTION)


def export(name, out_dir, shape_only):
    constructor, build, shape = ZOO[name]
    torch.manual_seed(0)
    net = build().eval()
    x = INPUTS[name]() if name in INPUTS else torch.randn(1, *shape)
    path = os.path.join(out_dir, name + ".onnx")
    # Autograd stays on: under no_grad PyTorch 1.13 takes the fused "fast path" of
    # nn.MultiheadAttention / TransformerEncoderLayer, whose aten ops have no ONNX export.
    with torch.enable_grad():
        if name in DETECTION:
            torch.onnx.export(net, x, path, opset_version=OPSET, input_names=["input"],
                              output_names=["boxes", "scores", "labels"], do_constant_folding=True)
        else:
            torch.onnx.export(net, x, path, opset_version=OPSET, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, do_constant_folding=True)
    params = sum(p.numel() for p in net.parameters())
    if params == 0:  # a quantized model keeps its weights packed, not as parameters
        for m in net.modules():
            if callable(getattr(m, "weight", None)):
                params += m.weight().numel() + (m.bias().numel() if m.bias() is not None else 0)
    model = onnx.load(path)
    constants_to_initializers(model)
    if shape_only:
        data = name + ".onnx.data"
        external_data_helper.convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                                            location=data, size_threshold=1024)
        onnx.save(model, path)
        if os.path.exists(os.path.join(out_dir, data)):
            os.remove(os.path.join(out_dir, data))
    else:
        onnx.save(model, path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {
        "name": name,
        "file": name + ".onnx",
        "source": "torchvision %s / torch %s (random weights, no download)" % (torchvision.__version__,
                                                                            torch.__version__),
        "constructor": constructor,
        "input_shape": ([1] if name in DETECTION else ["N"]) + list(shape),
        "opset": OPSET,
        "parameters": params,
        "weights": "shape-only (external data dropped)" if shape_only else "embedded",
        "nodes": len(model.graph.node),
        "sha256": digest,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", metavar="DIR", help="write full-weight models to DIR instead of the shape-only zoo")
    ap.add_argument("--only", help="comma-separated model names")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        sys.exit("export_zoo: unknown model(s): " + ", ".join(unknown))
    shape_only = args.full is None
    out_dir = args.full or os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo")
    run_exports("export_zoo", out_dir, OPSET,
                [(name, lambda name=name: export(name, out_dir, shape_only)) for name in names])

if __name__ == "__main__":
    main()
