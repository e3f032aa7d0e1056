#!/usr/bin/python3
"""The Python peer of Strata's data-parallel throughput benchmark.

One rank of PyTorch's DistributedDataParallel (--strategy=ddp) or
FullyShardedDataParallel (--strategy=fsdp: FSDP1, FULL_SHARD, one unit per
transformer block by an auto-wrap policy, use_orig_params=True, its other
options at their defaults), Gloo backend, training the GPT of train_gpt.py
(same model, GPT-2 init) with AdamW (beta2 0.95, weight decay 0.1 on
matrices) and global-norm clipping on random tokens. Started by
//benchmarks:ddp_throughput through Strata's launcher, which exports RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT and OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1
per rank. Rank 0 writes one JSON line to --out: the measured tokens/s (global
batch), the step time and every rank's peak resident set (VmHWM, MiB) after
the timed steps; or, where this torch cannot import FSDP (Debian 12's
python3-torch 1.13 under Python 3.11), {"unavailable": reason}, and exits 0
without training, so that the driver reports the case as not measured.
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

from train_gpt import Block, Gpt  # noqa: E402


def peak_resident_mib():
    """This process's VmHWM (/proc/self/status) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


def wrap_fsdp(model):
    """FSDP1 FULL_SHARD with a unit per Block; None and the reason where this
    torch cannot import FSDP."""
    try:
        from torch.distributed.fsdp import (FullyShardedDataParallel,
                                            ShardingStrategy)
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    except Exception as e:  # noqa: BLE001 (any import failure means "cannot")
        return None, (f"torch {torch.__version__} under Python "
                      f"{sys.version.split()[0]} cannot import FSDP "
                      f"({type(e).__name__}: {e})")
    return FullyShardedDataParallel(
        model, sharding_strategy=ShardingStrategy.FULL_SHARD,
        auto_wrap_policy=ModuleWrapPolicy({Block}),
        use_orig_params=True,
        # On the CPU: without a device, PyTorch 2.6 looks for an accelerator
        # ("FSDP needs a non-CPU accelerator device").
        device_id=torch.device("cpu")), None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--strategy", choices=["ddp", "fsdp"], default="ddp")
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
    # PyTorch >= 2.4's TCPStore asks for libuv by default, which Debian's
    # python3-torch 2.6 is built without ("use_libuv was requested but
    # PyTorch was build without libuv support"); the classic store serves
    # two ranks as well.
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    gpt = Gpt(a.vocab, a.seq_len, a.layers, a.heads, a.dim)
    # Weight decay on matrices, by name: FSDP with use_orig_params=True keeps
    # the names but turns the parameters into 1-D views of its shards.
    decay_names = {n for n, q in gpt.named_parameters() if q.dim() >= 2}
    if a.strategy == "fsdp":
        model, unavailable = wrap_fsdp(gpt)
        if unavailable is not None:
            if rank == 0:
                with open(a.out, "w") as f:
                    f.write(json.dumps({"unavailable": unavailable}) + "\n")
            dist.destroy_process_group()
            return
        clip = model.clip_grad_norm_  # The norm over every rank's shards.
    else:
        model = DistributedDataParallel(gpt)
        clip = lambda norm: torch.nn.utils.clip_grad_norm_(  # noqa: E731
            model.parameters(), norm)
    # The wrappers' prefixes: DDP's "module.", FSDP's "_fsdp_wrapped_module."
    # per unit.
    named = [(n.replace("_fsdp_wrapped_module.", "").removeprefix("module."),
              q) for n, q in model.named_parameters()]
    decay = [q for n, q in named if n in decay_names]
    no_decay = [q for n, q in named if n not in decay_names]
    assert len(decay) == len(decay_names), sorted(n for n, _ in named)
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
        clip(1.0)
        opt.step()

    for _ in range(a.warmup_steps):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    rss = torch.zeros(world, dtype=torch.float64)
    rss[rank] = peak_resident_mib()
    dist.all_reduce(rss)
    if rank == 0:
        with open(a.out, "w") as f:
            f.write(json.dumps({
                "tokens_per_s": a.steps * a.batch * world * a.seq_len / elapsed,
                "step_ms": 1000 * elapsed / a.steps,
                "peak_rss_mib": rss.tolist(),
                "torch": torch.__version__,
            }) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
