#!/usr/bin/python3
"""The Python peer of Strata's DDP throughput benchmark.

One rank of PyTorch's DistributedDataParallel (Gloo backend) training the
GPT of train_gpt.py (same model, GPT-2 init) with AdamW and global-norm
clipping on random tokens. Started by //benchmarks:ddp_throughput through
Strata's launcher, which exports RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
and OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1 per rank. Rank 0 writes one JSON
line with the measured tokens/s (global batch) to --out.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from train_gpt import Gpt  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq_len", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--dim", type=int, required=True)
    p.add_argument("--batch", type=int, required=True, help="Per rank.")
    p.add_argument("--warmup_steps", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(
        Gpt(a.vocab, a.seq_len, a.layers, a.heads, a.dim))
    params = list(model.parameters())
    decay = [q for q in params if q.dim() >= 2]
    no_decay = [q for q in params if q.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-4, betas=(0.9, 0.95))
    torch.manual_seed(1000 + rank)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1))
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step():
        opt.zero_grad(set_to_none=False)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    for _ in range(a.warmup_steps):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        with open(a.out, "w") as f:
            f.write(json.dumps({
                "tokens_per_s": a.steps * a.batch * world * a.seq_len / elapsed,
                "step_ms": 1000 * elapsed / a.steps,
                "torch": torch.__version__,
            }) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
