#!/usr/bin/python3
"""Export transformer decoders (language models) to ONNX, as prefill and decode-with-past graphs.

Run with Debian's interpreter (/usr/bin/python3: python3-torch 1.13, python3-onnx). The architectures
are written here in plain torch.nn (no transformers library, no download); weights are random.

  /usr/bin/python3 models/export_decoders.py                  # shape-only decoders -> models/llm/
  /usr/bin/python3 models/export_decoders.py --only gpt2_small
  /usr/bin/python3 models/export_decoders.py --full DIR       # with weights (not committed)

Each architecture gives two graphs, exported at opset 17 with their dims symbolic and named as
common exports name them:
  NAME_prefill.onnx  input_ids [batch_size, sequence_length] -> logits, present.{i}.key/value
  NAME_decode.onnx   input_ids [batch_size, sequence_length] and past_key_values.{i}.key/value
                     [batch_size, kv_heads, past_sequence_length, head_dim] -> logits, present.*
(present.* have total_sequence_length = past_sequence_length + sequence_length). The rotary tables
(Cos, Sin of Range) and the causal mask (Trilu) are computed in the graph from the dims, as PyTorch
exports of decoders compute them. Give the dims to Floorline with
  floorline layers models/llm --dim sequence_length=128 --dim past_sequence_length=0,512
"""
import argparse
import hashlib
import math
import os
import sys
import tempfile

import onnx
import torch
from onnx import external_data_helper

from export_common import run_exports

OPSET = 17


class Gpt2Block(torch.nn.Module):
    """GPT-2: pre-LayerNorm, fused QKV projection with bias, multi-head attention, GELU MLP (4x)."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = torch.nn.LayerNorm(width)
        self.c_attn = torch.nn.Linear(width, 3 * width)
        self.c_proj = torch.nn.Linear(width, width)
        self.ln_2 = torch.nn.LayerNorm(width)
        self.c_fc = torch.nn.Linear(width, 4 * width)
        self.c_fc_proj = torch.nn.Linear(4 * width, width)

    def forward(self, x, past_k, past_v):
        b, s, w = x.shape
        h = self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(w, dim=2)
        q = q.view(b, s, h, w // h).transpose(1, 2)
        k, v = k.view(b, s, h, w // h).transpose(1, 2), v.view(b, s, h, w // h).transpose(1, 2)
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        a = attention(q, k, v)
        x = x + self.c_proj(a.transpose(1, 2).reshape(b, s, w))
        x = x + self.c_fc_proj(torch.nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x, k, v


class RmsNorm(torch.nn.Module):
    def __init__(self, width, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class LlamaBlock(torch.nn.Module):
    """Llama: RMSNorm, rotary embedding on q and k, grouped-query attention, SwiGLU MLP, no biases."""

    def __init__(self, width, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.input_layernorm = RmsNorm(width)
        self.q_proj = torch.nn.Linear(width, width, bias=False)
        self.k_proj = torch.nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.v_proj = torch.nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.o_proj = torch.nn.Linear(width, width, bias=False)
        self.post_attention_layernorm = RmsNorm(width)
        self.gate_proj = torch.nn.Linear(width, hidden, bias=False)
        self.up_proj = torch.nn.Linear(width, hidden, bias=False)
        self.down_proj = torch.nn.Linear(hidden, width, bias=False)

    def forward(self, x, past_k, past_v, cos, sin):
        b, s, w = x.shape
        h, kvh, d = self.heads, self.kv_heads, self.head_dim
        y = self.input_layernorm(x)
        q = self.q_proj(y).view(b, s, h, d).transpose(1, 2)
        k = self.k_proj(y).view(b, s, kvh, d).transpose(1, 2)
        v = self.v_proj(y).view(b, s, kvh, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        t = k.shape[2]
        rep = h // kvh  # grouped-query attention: each kv head serves `rep` query heads
        kk = k[:, :, None].expand(b, kvh, rep, t, d).reshape(b, h, t, d)
        vv = v[:, :, None].expand(b, kvh, rep, t, d).reshape(b, h, t, d)
        a = attention(q, kk, vv)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, w))
        y = self.post_attention_layernorm(x)
        x = x + self.down_proj(torch.nn.functional.silu(self.gate_proj(y)) * self.up_proj(y))
        return x, k, v


def attention(q, k, v):
    """Scaled dot-product attention with the causal mask of a query block that follows t - s cached
    positions: query i (absolute position t - s + i) sees keys 0 .. t - s + i."""
    s, t = q.shape[2], k.shape[2]
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[3])
    mask = torch.triu(torch.full((s, t), float("-inf")), diagonal=1 + t - s)
    return torch.matmul(torch.softmax(scores + mask, dim=-1), v)


class Decoder(torch.nn.Module):
    def __init__(self, kind, vocab, width, layers, heads, kv_heads=None, hidden=None, max_positions=2048):
        super().__init__()
        self.kind = kind
        self.embed = torch.nn.Embedding(vocab, width)
        if kind == "gpt2":
            self.positions = torch.nn.Embedding(max_positions, width)
            self.blocks = torch.nn.ModuleList([Gpt2Block(width, heads) for _ in range(layers)])
            self.norm = torch.nn.LayerNorm(width)
        else:
            d = width // heads
            self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d)))
            self.blocks = torch.nn.ModuleList([LlamaBlock(width, heads, kv_heads, hidden) for _ in range(layers)])
            self.norm = RmsNorm(width)
        self.lm_head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, input_ids, *past):
        s = input_ids.shape[1]
        p = past[0].shape[2] if past else 0
        x = self.embed(input_ids)
        pos = torch.arange(p, p + s)
        if self.kind == "gpt2":
            x = x + self.positions(pos)
        else:
            freqs = pos[:, None].float() * self.inv_freq[None, :]
            angles = torch.cat([freqs, freqs], dim=-1)
            cos, sin = angles.cos(), angles.sin()
        presents = []
        for i, block in enumerate(self.blocks):
            pk, pv = (past[2 * i], past[2 * i + 1]) if past else (None, None)
            if self.kind == "gpt2":
                x, k, v = block(x, pk, pv)
            else:
                x, k, v = block(x, pk, pv, cos, sin)
            presents += [k, v]
        return (self.lm_head(self.norm(x)), *presents)


# name: (description, constructor arguments)
DECODERS = {
    "gpt2_small": ("GPT-2 small architecture: 12 layers, width 768, 12 heads, vocab 50257; LM head not tied to the "
                   "embedding and 4096 positions (165 M parameters; GPT-2 small ties them: 124 M)",
                   dict(kind="gpt2", vocab=50257, width=768, layers=12, heads=12, max_positions=4096)),
    "llama_1b": ("Llama architecture (TinyLlama 1.1B's shape): 22 layers, width 2048, 32 query heads, "
                 "4 key/value heads, SwiGLU hidden 5632, vocab 32000, rotary, RMSNorm (1.1 B parameters)",
                 dict(kind="llama", vocab=32000, width=2048, layers=22, heads=32, kv_heads=4, hidden=5632)),
}


def export(name, phase, out_dir, shape_only):
    description, args = DECODERS[name]
    torch.manual_seed(0)
    net = Decoder(**args).eval()
    layers = len(net.blocks)
    kv_heads = args.get("kv_heads") or args["heads"]
    head_dim = args["width"] // args["heads"]
    ids = torch.randint(0, args["vocab"], (1, 8 if phase == "prefill" else 1))
    inputs, names = [ids], ["input_ids"]
    dynamic = {"input_ids": {0: "batch_size", 1: "sequence_length"},
               "logits": {0: "batch_size", 1: "sequence_length"}}
    for i in range(layers):
        for kv in ("key", "value"):
            if phase == "decode":
                n = "past_key_values.%d.%s" % (i, kv)
                inputs.append(torch.randn(1, kv_heads, 16, head_dim))
                names.append(n)
                dynamic[n] = {0: "batch_size", 2: "past_sequence_length"}
            dynamic["present.%d.%s" % (i, kv)] = {0: "batch_size", 2: "total_sequence_length"}
    outputs = ["logits"] + ["present.%d.%s" % (i, kv) for i in range(layers) for kv in ("key", "value")]
    file = "%s_%s.onnx" % (name, phase)
    path = os.path.join(out_dir, file)
    # A model over 2 GB is exported with one external file per tensor: into a scratch folder.
    with tempfile.TemporaryDirectory() as scratch:
        exported = os.path.join(scratch, file)
        with torch.no_grad():
            torch.onnx.export(net, tuple(inputs), exported, opset_version=OPSET, input_names=names,
                              output_names=outputs, dynamic_axes=dynamic, do_constant_folding=True)
        model = onnx.load(exported)  # with its external data, if any
    data = file + ".data"
    external_data_helper.convert_model_to_external_data(model, all_tensors_to_one_file=True, location=data,
                                                        size_threshold=1024)
    onnx.save(model, path)
    if shape_only and os.path.exists(os.path.join(out_dir, data)):
        os.remove(os.path.join(out_dir, data))
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {
        "name": file[:-5],
        "file": file,
        "source": "torch %s, models/export_decoders.py (random weights, no download)" % torch.__version__,
        "constructor": description + "; " + phase + " graph",
        "dims": sorted({d for axes in dynamic.values() for d in axes.values()}),
        "opset": OPSET,
        "parameters": sum(p.numel() for p in net.parameters()),
        "weights": "shape-only (external data dropped)" if shape_only else "external data",
        "nodes": len(model.graph.node),
        "sha256": digest,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", metavar="DIR", help="write full-weight models to DIR instead of the shape-only folder")
    ap.add_argument("--only", help="comma-separated architecture names (%s)" % ", ".join(DECODERS))
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(DECODERS)
    unknown = [n for n in names if n not in DECODERS]
    if unknown:
        sys.exit("export_decoders: unknown architecture(s): " + ", ".join(unknown))
    shape_only = args.full is None
    out_dir = args.full or os.path.join(os.path.dirname(os.path.abspath(__file__)), "llm")
    run_exports("export_decoders", out_dir, OPSET,
                [("%s_%s" % (name, phase), lambda name=name, phase=phase: export(name, phase, out_dir, shape_only))
                 for name in names for phase in ("prefill", "decode")])

if __name__ == "__main__":
    main()
