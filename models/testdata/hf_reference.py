"""Hugging Face GPT-2 and Llama forwards in numpy (float64), written from the
published modeling math (transformers' modeling_gpt2.py / modeling_llama.py:
GPT2LMHeadModel with Conv1D weights [in, out] and gelu_new; LlamaForCausalLM
with RMSNorm, rotate-half rotary embeddings, grouped-query attention by
repeat_kv and SwiGLU), on random weights in Hugging Face's names and
layouts. The oracle of models/hf_reference_test.cc: Strata, after
converting the same weights, must give the same logits.

Usage (Debian's /usr/bin/python3 with python3-numpy):
  hf_reference.py gpt2|llama|llama-tied DIR
writes DIR/config.json, DIR/model.safetensors (F32), DIR/tokens.safetensors
("tokens": I64 [2, 9]) and DIR/logits.safetensors ("logits": F64 [2, 9, V]).
"""

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "serialization", "testdata"))
import safetensors_numpy  # noqa: E402

BATCH, SEQ = 2, 9


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def causal_attention(q, k, v):
    """q, k, v: [B, H, T, d]."""
    t, d = q.shape[2], q.shape[3]
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    mask = np.triu(np.ones((t, t), dtype=bool), 1)
    scores = np.where(mask, -np.inf, scores)
    return softmax(scores) @ v


def split_heads(x, heads):
    b, t, c = x.shape
    return x.reshape(b, t, heads, c // heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)


# ---- GPT-2 -----------------------------------------------------------------


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu)**2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(
        math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gpt2_forward(cfg, w, tokens):
    eps = cfg["layer_norm_epsilon"]
    p = lambda name: w["transformer." + name]  # noqa: E731
    t = tokens.shape[1]
    h = p("wte.weight")[tokens] + p("wpe.weight")[np.arange(t)]
    c = cfg["n_embd"]
    for i in range(cfg["n_layer"]):
        b = "h.%d." % i
        a = layer_norm(h, p(b + "ln_1.weight"), p(b + "ln_1.bias"), eps)
        # Conv1D: x @ W + b with W [in, out].
        qkv = a @ p(b + "attn.c_attn.weight") + p(b + "attn.c_attn.bias")
        q, k, v = (split_heads(y, cfg["n_head"])
                   for y in np.split(qkv, [c, 2 * c], axis=-1))
        y = merge_heads(causal_attention(q, k, v))
        h = h + y @ p(b + "attn.c_proj.weight") + p(b + "attn.c_proj.bias")
        m = layer_norm(h, p(b + "ln_2.weight"), p(b + "ln_2.bias"), eps)
        f = gelu_new(m @ p(b + "mlp.c_fc.weight") + p(b + "mlp.c_fc.bias"))
        h = h + f @ p(b + "mlp.c_proj.weight") + p(b + "mlp.c_proj.bias")
    h = layer_norm(h, p("ln_f.weight"), p("ln_f.bias"), eps)
    return h @ p("wte.weight").T  # lm_head tied to wte


def gpt2_weights(cfg, rng):
    c, v = cfg["n_embd"], cfg["vocab_size"]
    inner = cfg["n_inner"] or 4 * c
    w = {
        "transformer.wte.weight": rng.normal(0, 0.1, (v, c)),
        "transformer.wpe.weight": rng.normal(0, 0.1, (cfg["n_positions"], c)),
        "transformer.ln_f.weight": 1 + rng.normal(0, 0.1, c),
        "transformer.ln_f.bias": rng.normal(0, 0.1, c),
    }
    shapes = {
        "ln_1.weight": (c,), "ln_1.bias": (c,),
        "attn.c_attn.weight": (c, 3 * c), "attn.c_attn.bias": (3 * c,),
        "attn.c_proj.weight": (c, c), "attn.c_proj.bias": (c,),
        "ln_2.weight": (c,), "ln_2.bias": (c,),
        "mlp.c_fc.weight": (c, inner), "mlp.c_fc.bias": (inner,),
        "mlp.c_proj.weight": (inner, c), "mlp.c_proj.bias": (c,),
    }
    for i in range(cfg["n_layer"]):
        for name, shape in shapes.items():
            value = rng.normal(0, 0.1, shape)
            if name.startswith("ln_") and name.endswith("weight"):
                value += 1
            w["transformer.h.%d.%s" % (i, name)] = value
    return w


# ---- Llama -----------------------------------------------------------------


def rms_norm(x, w, eps):
    return w * (x / np.sqrt((x**2).mean(-1, keepdims=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def llama3_inv_freq(inv_freq, scaling):
    """Llama 3.1's frequency scaling (Hugging Face's rope_type "llama3")."""
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for f in inv_freq:
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            out.append(f)
        elif wavelen > old / low:
            out.append(f / factor)
        else:
            s = (old / wavelen - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return np.array(out)


def llama_forward(cfg, w, tokens):
    eps = cfg["rms_norm_eps"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg["num_key_value_heads"]
    d = cfg["hidden_size"] // heads
    t = tokens.shape[1]
    inv_freq = 1.0 / (cfg["rope_theta"]**(np.arange(0, d, 2) / d))
    if cfg.get("rope_scaling"):
        inv_freq = llama3_inv_freq(inv_freq, cfg["rope_scaling"])
    freqs = np.outer(np.arange(t), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)  # [T, d]
    cos, sin = np.cos(emb), np.sin(emb)
    h = w["model.embed_tokens.weight"][tokens]
    for i in range(cfg["num_hidden_layers"]):
        p = lambda name: w["model.layers.%d.%s" % (i, name)]  # noqa: E731
        a = rms_norm(h, p("input_layernorm.weight"), eps)
        q = split_heads(a @ p("self_attn.q_proj.weight").T, heads)
        k = split_heads(a @ p("self_attn.k_proj.weight").T, kv_heads)
        v = split_heads(a @ p("self_attn.v_proj.weight").T, kv_heads)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # repeat_kv: query head j reads key/value head j // (heads/kv_heads).
        k = np.repeat(k, heads // kv_heads, axis=1)
        v = np.repeat(v, heads // kv_heads, axis=1)
        y = merge_heads(causal_attention(q, k, v))
        h = h + y @ p("self_attn.o_proj.weight").T
        m = rms_norm(h, p("post_attention_layernorm.weight"), eps)
        gate = m @ p("mlp.gate_proj.weight").T
        silu = gate / (1 + np.exp(-gate))
        h = h + (silu * (m @ p("mlp.up_proj.weight").T)) @ p(
            "mlp.down_proj.weight").T
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = (w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else
            w["lm_head.weight"])
    return h @ head.T


def llama_weights(cfg, rng):
    c, v = cfg["hidden_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d, ffn = c // heads, cfg["intermediate_size"]
    w = {
        "model.embed_tokens.weight": rng.normal(0, 0.1, (v, c)),
        "model.norm.weight": 1 + rng.normal(0, 0.1, c),
    }
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = rng.normal(0, 0.1, (v, c))
    shapes = {
        "self_attn.q_proj.weight": (heads * d, c),
        "self_attn.k_proj.weight": (kv * d, c),
        "self_attn.v_proj.weight": (kv * d, c),
        "self_attn.o_proj.weight": (c, heads * d),
        "mlp.gate_proj.weight": (ffn, c),
        "mlp.up_proj.weight": (ffn, c),
        "mlp.down_proj.weight": (c, ffn),
        "input_layernorm.weight": (c,),
        "post_attention_layernorm.weight": (c,),
    }
    for i in range(cfg["num_hidden_layers"]):
        for name, shape in shapes.items():
            value = rng.normal(0, 0.1, shape)
            if name.endswith("layernorm.weight"):
                value += 1
            w["model.layers.%d.%s" % (i, name)] = value
    return w


CONFIGS = {
    "gpt2": {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
        "vocab_size": 96, "n_positions": 32, "n_embd": 48, "n_layer": 2,
        "n_head": 4, "n_inner": None, "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new",
    },
    "llama": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "vocab_size": 96, "hidden_size": 64, "intermediate_size": 80,
        "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 32,
        "rms_norm_eps": 1e-6, "rope_theta": 1000.0, "rope_scaling": None,
        "hidden_act": "silu", "tie_word_embeddings": False,
    },
}
CONFIGS["llama-tied"] = dict(CONFIGS["llama"], num_key_value_heads=4,
                             tie_word_embeddings=True)
# Llama 3.1's rope scaling with a short original context, so that the 8
# frequencies of a 16-wide head fall in all three bands: wavelengths below
# 16 kept, 16 to 64 interpolated, above 64 divided by the factor.
CONFIGS["llama3-scaled"] = dict(CONFIGS["llama"], rope_scaling={
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 64})


def main():
    case, out = sys.argv[1], sys.argv[2]
    cfg = CONFIGS[case]
    rng = np.random.default_rng(1234)
    gpt2 = case == "gpt2"
    weights = gpt2_weights(cfg, rng) if gpt2 else llama_weights(cfg, rng)
    # The file holds float32; the forward uses exactly those values.
    weights = {n: np.asarray(a, dtype=np.float32) for n, a in weights.items()}
    tokens = rng.integers(0, cfg["vocab_size"], (BATCH, SEQ))
    w64 = {n: a.astype(np.float64) for n, a in weights.items()}
    logits = (gpt2_forward if gpt2 else llama_forward)(cfg, w64, tokens)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    safetensors_numpy.save(os.path.join(out, "model.safetensors"),
                           [(n, "F32", a) for n, a in weights.items()],
                           {"format": "pt"}, pad_header=True)
    safetensors_numpy.save(os.path.join(out, "tokens.safetensors"),
                           [("tokens", "I64", tokens)])
    safetensors_numpy.save(os.path.join(out, "logits.safetensors"),
                           [("logits", "F64", logits)])


if __name__ == "__main__":
    main()
