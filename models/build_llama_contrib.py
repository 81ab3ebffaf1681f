#!/usr/bin/python3
"""Builds models/llm/llama_1b_contrib.onnx: the Llama decoder of export_decoders.py (TinyLlama 1.1B's
shapes) written with ONNX Runtime's com.microsoft operators, as ONNX Runtime's model builder
(onnxruntime-genai) writes decoders: SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization
(RMSNorm with the residual add), GroupQueryAttention with the rotary embedding inside (do_rotary,
cos/sin caches), SwiGLU as MatMul, Sigmoid, Mul. One graph serves the prefill (past_sequence_length
0) and the decode step:

  input_ids [batch_size, sequence_length] int64,
  past_key_values.{i}.key/value [batch_size, 4, past_sequence_length, 64]
  -> logits [batch_size, sequence_length, 32000], present.{i}.key/value

GroupQueryAttention's seqlens_k and total_sequence_length are computed in the graph from the
shapes (past + new tokens; every token attends), so the model takes the same inputs as the
PyTorch exports. Random weights, stored as external data that is then dropped (shape-only, as
the other decoders here); `floorline run` materializes them for ONNX Runtime.

Run with Debian's interpreter: /usr/bin/python3 models/build_llama_contrib.py
"""
import hashlib
import json
import os

import onnx
from onnx import TensorProto, helper

LAYERS, WIDTH, HEADS, KV_HEADS, HIDDEN, VOCAB, MAX_POS = 22, 2048, 32, 4, 5632, 32000, 2048
HEAD = WIDTH // HEADS
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llm")
FILE = "llama_1b_contrib.onnx"
inits, nodes, params = [], [], [0]


def weight(name, shape):
    """A float initializer stored as external data (dropped: the file is shape-only)."""
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    n = 1
    for d in shape:
        n *= d
    for key, value in (("location", FILE + ".data"), ("offset", str(params[0] * 4)), ("length", str(n * 4))):
        e = t.external_data.add()
        e.key, e.value = key, value
    params[0] += n
    inits.append(t)
    return name


def const(name, values, dtype=TensorProto.INT64, dims=None):
    inits.append(helper.make_tensor(name, dtype, [len(values)] if dims is None else dims, values))
    return name


def node(op, inputs, outputs, name, domain="", **attrs):
    nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
    return outputs[0]


def main():
    os.makedirs(OUT, exist_ok=True)
    # seqlens_k = total - 1 per batch row, total_sequence_length = past + new tokens (int32).
    node("Shape", ["input_ids"], ["ids_shape"], "ids_shape")
    node("Shape", ["past_key_values.0.key"], ["past_shape"], "past_shape")
    node("Gather", ["ids_shape", const("one_i", [1], dims=[])], ["new_len"], "new_len", axis=0)
    node("Gather", ["past_shape", const("two_i", [2], dims=[])], ["past_len"], "past_len", axis=0)
    node("Add", ["past_len", "new_len"], ["total64"], "total64")
    node("Cast", ["total64"], ["total_sequence_length"], "total_sequence_length", to=TensorProto.INT32)
    node("Sub", ["total64", "one_i"], ["last64"], "last64")
    node("Slice", ["ids_shape", const("zero1", [0]), const("one1", [1]), const("zero1_axes", [0])], ["batch1"],
         "batch1")
    node("Expand", ["last64", "batch1"], ["seqlens64"], "seqlens64")
    node("Cast", ["seqlens64"], ["seqlens_k"], "seqlens_k", to=TensorProto.INT32)
    cos, sin = weight("cos_cache", [MAX_POS, HEAD // 2]), weight("sin_cache", [MAX_POS, HEAD // 2])

    h = node("Gather", [weight("embed_tokens", [VOCAB, WIDTH]), "input_ids"], ["embedded"], "embed_tokens", axis=0)
    residual, mlp_out = h, None
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", VOCAB])]
    for i in range(LAYERS):
        p = "layers.%d." % i
        if i == 0:
            n1 = node("SimplifiedLayerNormalization", [h, weight(p + "input_layernorm", [WIDTH])], [p + "n1"],
                      p + "input_layernorm", epsilon=1e-5)
        else:
            n1 = node("SkipSimplifiedLayerNormalization", [residual, mlp_out, weight(p + "input_layernorm", [WIDTH])],
                      [p + "n1", "", "", p + "residual1"], p + "input_layernorm", domain="com.microsoft",
                      epsilon=1e-5)
            residual = p + "residual1"
        q = node("MatMul", [n1, weight(p + "q_proj", [WIDTH, WIDTH])], [p + "q"], p + "q_proj")
        k = node("MatMul", [n1, weight(p + "k_proj", [WIDTH, KV_HEADS * HEAD])], [p + "k"], p + "k_proj")
        v = node("MatMul", [n1, weight(p + "v_proj", [WIDTH, KV_HEADS * HEAD])], [p + "v"], p + "v_proj")
        past_k, past_v = "past_key_values.%d.key" % i, "past_key_values.%d.value" % i
        present_k, present_v = "present.%d.key" % i, "present.%d.value" % i
        for name in (past_k, past_v):
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                        ["batch_size", KV_HEADS, "past_sequence_length", HEAD]))
        for name in (present_k, present_v):
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                         ["batch_size", KV_HEADS, "total_sequence_length", HEAD]))
        attn = node("GroupQueryAttention", [q, k, v, past_k, past_v, "seqlens_k", "total_sequence_length", cos, sin],
                    [p + "attn", present_k, present_v], p + "attn", domain="com.microsoft", num_heads=HEADS,
                    kv_num_heads=KV_HEADS, do_rotary=1)
        o = node("MatMul", [attn, weight(p + "o_proj", [WIDTH, WIDTH])], [p + "o"], p + "o_proj")
        n2 = node("SkipSimplifiedLayerNormalization", [residual, o, weight(p + "post_attention_layernorm", [WIDTH])],
                  [p + "n2", "", "", p + "residual2"], p + "post_attention_layernorm", domain="com.microsoft",
                  epsilon=1e-5)
        residual = p + "residual2"
        gate = node("MatMul", [n2, weight(p + "gate_proj", [WIDTH, HIDDEN])], [p + "gate"], p + "gate_proj")
        up = node("MatMul", [n2, weight(p + "up_proj", [WIDTH, HIDDEN])], [p + "up"], p + "up_proj")
        sig = node("Sigmoid", [gate], [p + "gate_sigmoid"], p + "gate_sigmoid")
        silu = node("Mul", [gate, sig], [p + "silu"], p + "silu")
        prod = node("Mul", [silu, up], [p + "swiglu"], p + "swiglu")
        mlp_out = node("MatMul", [prod, weight(p + "down_proj", [HIDDEN, WIDTH])], [p + "mlp"], p + "down_proj")
    n = node("SkipSimplifiedLayerNormalization", [residual, mlp_out, weight("norm", [WIDTH])], ["final_norm"],
             "norm", domain="com.microsoft", epsilon=1e-5)
    node("MatMul", [n, weight("lm_head", [WIDTH, VOCAB])], ["logits"], "lm_head")

    graph = helper.make_graph(nodes, "llama_1b_contrib", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, producer_name="floorline models/build_llama_contrib.py",
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    path = os.path.join(OUT, FILE)
    onnx.save(model, path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    manifest_path = os.path.join(OUT, "MANIFEST.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    entry = {
        "name": FILE[:-5],
        "file": FILE,
        "source": "onnx %s helper API, models/build_llama_contrib.py (random weights, no download)" % onnx.__version__,
        "constructor": "Llama architecture (TinyLlama 1.1B's shape, as llama_1b_*) written with ONNX Runtime's "
                       "com.microsoft operators (SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization, "
                       "GroupQueryAttention with the rotary inside); one graph for prefill and decode",
        "dims": ["batch_size", "past_sequence_length", "sequence_length", "total_sequence_length"],
        "opset": 17,
        "parameters": params[0] - 2 * MAX_POS * (HEAD // 2),
        "weights": "shape-only (external data dropped)",
        "nodes": len(nodes),
        "sha256": digest,
    }
    manifest["models"] = [m for m in manifest["models"] if m["name"] != entry["name"]] + [entry]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote", path, len(nodes), "nodes,", entry["parameters"], "parameters")


if __name__ == "__main__":
    main()
