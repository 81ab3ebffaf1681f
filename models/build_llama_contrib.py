#!/usr/bin/python3
"""Builds models/llm/llama_1b_contrib.onnx: the Llama decoder of export_decoders.py (TinyLlama 1.1B's
shapes) written with ONNX Runtime's com.microsoft operators, as ONNX Runtime's model builder
(onnxruntime-genai) writes decoders: SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization
(RMSNorm with the residual add), GroupQueryAttention with the rotary embedding inside (do_rotary,
cos/sin caches of 4096 positions), SwiGLU as MatMul, Sigmoid, Mul. One graph serves the prefill (past_sequence_length
0) and the decode step:

  input_ids [batch_size, sequence_length] int64,
  past_key_values.{i}.key/value [batch_size, 4, past_sequence_length, 64]
  -> logits [batch_size, sequence_length, 32000], present.{i}.key/value

GroupQueryAttention's seqlens_k and total_sequence_length are computed in the graph from the
shapes (past + new tokens; every token attends), so the model takes the same inputs as the
PyTorch exports. Random weights, stored as external data that is then dropped (shape-only, as
the other decoders here); `floorline run` materializes them for ONNX Runtime.

With --int4 it writes llama_1b_int4.onnx instead: the same graph with every linear layer (the
projections, the MLP and the LM head) a MatMulNBits over 4-bit weights in blocks of 32 with packed
zero points, as ONNX Runtime's MatMul4BitsQuantizer writes them (the embedding stays f32).

Run with Debian's interpreter: /usr/bin/python3 models/build_llama_contrib.py [--int4]
"""
import sys
import hashlib
import json
import os

import onnx
from onnx import TensorProto, helper

LAYERS, WIDTH, HEADS, KV_HEADS, HIDDEN, VOCAB, MAX_POS = 22, 2048, 32, 4, 5632, 32000, 4096
HEAD = WIDTH // HEADS
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llm")
INT4 = "--int4" in sys.argv[1:]
BLOCK = 32
FILE = "llama_1b_int4.onnx" if INT4 else "llama_1b_contrib.onnx"
inits, nodes, params = [], [], [0]
offset = [0]


def weight(name, shape, dtype=TensorProto.FLOAT, parameters=None):
    """An initializer stored as external data (dropped: the file is shape-only)."""
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    n = 1
    for d in shape:
        n *= d
    size = n * (1 if dtype == TensorProto.UINT8 else 4)
    for key, value in (("location", FILE + ".data"), ("offset", str(offset[0])), ("length", str(size))):
        e = t.external_data.add()
        e.key, e.value = key, value
    offset[0] += size
    params[0] += n if parameters is None else parameters
    inits.append(t)
    return name


def linear(x, name, k, n):
    """x · W for W [k, n]: a MatMul, or with --int4 a MatMulNBits over 4-bit blocks of 32."""
    if not INT4:
        return node("MatMul", [x, weight(name, [k, n])], [name + ".out"], name)
    blocks = k // BLOCK
    qb = weight(name + ".qweight", [n, blocks, BLOCK // 2], TensorProto.UINT8, parameters=k * n)
    qs = weight(name + ".scales", [n * blocks], parameters=0)
    qz = weight(name + ".qzeros", [n * ((blocks + 1) // 2)], TensorProto.UINT8, parameters=0)
    return node("MatMulNBits", [x, qb, qs, qz], [name + ".out"], name, domain="com.microsoft", K=k, N=n, bits=4,
                block_size=BLOCK)


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
        q = linear(n1, p + "q_proj", WIDTH, WIDTH)
        k = linear(n1, p + "k_proj", WIDTH, KV_HEADS * HEAD)
        v = linear(n1, p + "v_proj", WIDTH, KV_HEADS * HEAD)
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
        o = linear(attn, p + "o_proj", WIDTH, WIDTH)
        n2 = node("SkipSimplifiedLayerNormalization", [residual, o, weight(p + "post_attention_layernorm", [WIDTH])],
                  [p + "n2", "", "", p + "residual2"], p + "post_attention_layernorm", domain="com.microsoft",
                  epsilon=1e-5)
        residual = p + "residual2"
        gate = linear(n2, p + "gate_proj", WIDTH, HIDDEN)
        up = linear(n2, p + "up_proj", WIDTH, HIDDEN)
        sig = node("Sigmoid", [gate], [p + "gate_sigmoid"], p + "gate_sigmoid")
        silu = node("Mul", [gate, sig], [p + "silu"], p + "silu")
        prod = node("Mul", [silu, up], [p + "swiglu"], p + "swiglu")
        mlp_out = linear(prod, p + "down_proj", HIDDEN, WIDTH)
    n = node("SkipSimplifiedLayerNormalization", [residual, mlp_out, weight("norm", [WIDTH])], ["final_norm"],
             "norm", domain="com.microsoft", epsilon=1e-5)
    if INT4:
        node("Identity", [linear(n, "lm_head", WIDTH, VOCAB)], ["logits"], "logits")
    else:
        node("MatMul", [n, weight("lm_head", [WIDTH, VOCAB])], ["logits"], "lm_head")

    graph = helper.make_graph(nodes, FILE[:-5], inputs, outputs, initializer=inits)
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
                       "GroupQueryAttention with the rotary inside" +
                       (", MatMulNBits: every linear layer's weights in 4 bits, blocks of 32, packed zero points"
                        if INT4 else "") + "); one graph for prefill and decode",
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
