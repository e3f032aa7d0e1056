#!/usr/bin/python3
"""The Python peer of Strata's training-throughput benchmark.

Trains the same GPT-2-style model as Strata's models/gpt (pre-LayerNorm,
GELU-tanh MLP, learned positions, tied embedding/head, no dropout) with
PyTorch's AdamW and global-norm clipping, on random tokens, and prints one
JSON line with the measured tokens/s. Run by
//benchmarks:train_throughput with Debian's python3-torch 1.13, with the same
config, batch and thread settings as the Strata side.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        h = self.ln_1(x)
        q, k, v = self.qkv(h).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        x = x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return x


class Gpt(nn.Module):
    def __init__(self, vocab, seq_len, layers, heads, dim):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq_len, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        # GPT-2's initialisation, as Strata's models/init: N(0, 0.02) weights,
        # residual projections scaled by 1/sqrt(2 * layers), zero biases.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            elif name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq_len", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--dim", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--warmup_steps", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    # (PyTorch's default init — N(0, 1) embeddings — is not GPT-2's, and drives
    # this model into a regime where backward slows down several-fold after a
    # few steps; both sides use GPT-2's init.)
    model = Gpt(a.vocab, a.seq_len, a.layers, a.heads, a.dim)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-4, betas=(0.9, 0.95))
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1))
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=a.precision == "bf16"):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(a.warmup_steps):
        step()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    elapsed = time.perf_counter() - start
    print(json.dumps({
        "tokens_per_s": a.steps * a.batch * a.seq_len / elapsed,
        "step_ms": 1000 * elapsed / a.steps,
        "params": sum(q.numel() for q in model.parameters()),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
