#!/usr/bin/env python3
"""PyTorch eager training of Strata's Llama configs, for side-by-side figures.

The same architecture as models/llama (RMSNorm, rotary embeddings on
interleaved pairs, grouped-query attention, SwiGLU, optional tied head), the
same initialisation family, AdamW, and the same batch: what a PyTorch user
would run. Prints one JSON line: tokens/s over the timed steps, the step time,
peak GPU memory and the final loss.

  python3 tools/gpu/torch_llama_baseline.py --model=llama-1b --micro_batch=4 \
      --seq_len=1024 --steps=8 --precision=bf16

--attention=sdpa uses F.scaled_dot_product_attention (flash kernels: what a
PyTorch user runs); --attention=math the explicit softmax(q k^T) v that
Strata's Llama computes.
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

# name: (vocab, max_seq, layers, heads, kv_heads, dim, ffn, rope_theta, tied)
CONFIGS = {
    "llama-tiny": (256, 128, 2, 4, 2, 64, 172, 10000.0, False),
    "llama-1b": (128256, 2048, 16, 32, 8, 2048, 8192, 500000.0, True),
    "llama-7b": (32000, 4096, 32, 32, 32, 4096, 11008, 10000.0, False),
}


class Block(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn, attention):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attention = attention
        self.attn_norm = torch.nn.RMSNorm(dim, eps=1e-5)
        self.q = torch.nn.Linear(dim, dim, bias=False)
        self.k = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o = torch.nn.Linear(dim, dim, bias=False)
        self.mlp_norm = torch.nn.RMSNorm(dim, eps=1e-5)
        self.gate = torch.nn.Linear(dim, ffn, bias=False)
        self.up = torch.nn.Linear(dim, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, dim, bias=False)

    def rotate(self, x, cos, sin):
        # Interleaved pairs (x0, x1), (x2, x3), ... rotated by the angles.
        b, t, h, d = x.shape
        pairs = x.float().view(b, t, h, d // 2, 2)
        x0, x1 = pairs[..., 0], pairs[..., 1]
        c, s = cos[:t].view(1, t, 1, d // 2), sin[:t].view(1, t, 1, d // 2)
        out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)
        return out.view(b, t, h, d).to(x.dtype)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.rotate(self.q(h).view(b, t, self.heads, self.head_dim), cos, sin)
        k = self.rotate(self.k(h).view(b, t, self.kv_heads, self.head_dim), cos, sin)
        v = self.v(h).view(b, t, self.kv_heads, self.head_dim)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        repeat = self.heads // self.kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        if self.attention == "sdpa":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
            mask = torch.full((t, t), float("-inf"), device=x.device).triu(1)
            a = torch.softmax(scores + mask, dim=-1, dtype=torch.float).to(v.dtype) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(torch.nn.Module):
    def __init__(self, vocab, max_seq, layers, heads, kv_heads, dim, ffn, theta,
                 tied, attention):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(
            Block(dim, heads, kv_heads, ffn, attention) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(dim, eps=1e-5)
        self.head = None if tied else torch.nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(max_seq, dtype=torch.float64), inv)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        x = self.norm(x)
        weight = self.embed.weight if self.head is None else self.head.weight
        logits = F.linear(x, weight)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="llama-1b", choices=sorted(CONFIGS))
    parser.add_argument("--micro_batch", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup_steps", type=int, default=2)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument("--attention", choices=["sdpa", "math"], default="sdpa")
    args = parser.parse_args()
    torch.manual_seed(1)
    device = torch.device("cuda")
    model = Llama(*CONFIGS[args.model], attention=args.attention).to(device)
    vocab = CONFIGS[args.model][0]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1,
                                  betas=(0.9, 0.95), eps=1e-8)
    tokens = torch.randint(0, vocab, (args.micro_batch, args.seq_len + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    autocast = torch.autocast("cuda", dtype=torch.bfloat16,
                              enabled=args.precision == "bf16")
    loss = None
    start = None
    for step in range(args.warmup_steps + args.steps):
        if step == args.warmup_steps:
            torch.cuda.synchronize()
            start = time.perf_counter()
        with autocast:
            loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    tokens_per_step = args.micro_batch * args.seq_len
    print(json.dumps({
        "framework": "pytorch-eager", "torch": torch.__version__,
        "model": args.model, "precision": args.precision,
        "attention": args.attention, "micro_batch": args.micro_batch,
        "seq_len": args.seq_len, "steps": args.steps,
        "step_s": elapsed / args.steps,
        "tokens_per_s": tokens_per_step * args.steps / elapsed,
        "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20,
        "final_loss": loss.item(),
    }))


if __name__ == "__main__":
    main()
