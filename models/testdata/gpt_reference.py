"""A plain PyTorch GPT-2 with Strata's parameter names and math.

The reference for models/interop_test.cc: the same architecture as
models/gpt.{h,cc} (learned positions, pre-LayerNorm blocks, GELU with the tanh
approximation, causal attention with the softmax in fp32, output head tied to
wte.weight, no dropout) written with torch.nn, so that its state_dict keys are
exactly Strata's.

Usage (run with Debian's /usr/bin/python3, which has torch 1.13):
  gpt_reference.py forward CONFIG_JSON STATE_DICT TOKENS OUT_LOGITS
      Loads STATE_DICT (must be a plain dict of tensors, strict), runs the
      forward on TOKENS ([B, T] int64 tensor file), saves the logits.
  gpt_reference.py init CONFIG_JSON SEED TOKENS OUT_STATE_DICT OUT_LOGITS
      Randomly initialises the model from SEED, saves model.state_dict() (an
      OrderedDict, as PyTorch users do) and the logits on TOKENS.
CONFIG_JSON has vocab_size, seq_len, num_layers, num_heads, dim, ffn_dim,
norm_eps.
"""

import json
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.num_heads = cfg["num_heads"]
        self.qkv = nn.Linear(cfg["dim"], 3 * cfg["dim"])
        self.proj = nn.Linear(cfg["dim"], cfg["dim"])

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.num_heads
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (y.view(b, t, self.num_heads, d).transpose(1, 2)
                   for y in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)
        y = torch.matmul(probs, v)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg["dim"], cfg["ffn_dim"])
        self.proj = nn.Linear(cfg["ffn_dim"], cfg["dim"])

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg["dim"], eps=cfg["norm_eps"])
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg["dim"], eps=cfg["norm_eps"])
        self.mlp = Mlp(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        self.wpe = nn.Embedding(cfg["seq_len"], cfg["dim"])
        self.blocks = nn.ModuleList(
            [Block(cfg) for _ in range(cfg["num_layers"])])
        self.ln_f = nn.LayerNorm(cfg["dim"], eps=cfg["norm_eps"])

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], dtype=torch.long)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


def forward(cfg, state_dict_path, tokens_path, out_logits):
    state_dict = torch.load(state_dict_path, weights_only=True)
    if type(state_dict) is not dict:
        raise TypeError(f"expected a dict, got {type(state_dict)}")
    for key, value in state_dict.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{key}: expected a tensor, got {type(value)}")
    model = Gpt(cfg)
    model.load_state_dict(state_dict, strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(torch.load(tokens_path, weights_only=True))
    torch.save(logits, out_logits)


def init(cfg, seed, tokens_path, out_state_dict, out_logits):
    torch.manual_seed(seed)
    model = Gpt(cfg)
    # Every parameter random and O(0.1), LayerNorm weights around 1, so that
    # logits are O(1) and every tensor's layout matters.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("ln") or ".ln_" in name:
                if name.endswith("weight"):
                    p.copy_(1 + 0.1 * torch.randn_like(p))
                else:
                    p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    model.eval()
    with torch.no_grad():
        logits = model(torch.load(tokens_path, weights_only=True))
    torch.save(model.state_dict(), out_state_dict)
    torch.save(logits, out_logits)


def main(argv):
    torch.set_num_threads(1)
    command, cfg = argv[1], json.loads(argv[2])
    if command == "forward":
        forward(cfg, *argv[3:6])
    elif command == "init":
        init(cfg, int(argv[3]), *argv[4:7])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv)
