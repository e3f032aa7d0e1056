"""Loads a DCP directory that Strata wrote with PyTorch's own
torch.distributed.checkpoint, for checkpoint/dcp's writer interop tests.

  dcp_load.py sharded DIR EXPECTED   2 Gloo ranks dcp.load DIR into DTensors
                                     sharded on dim 0 (0-d tensors plain),
                                     one per tensor of EXPECTED (a
                                     torch.save'd dict: DCP key -> tensor),
                                     and check every element's bytes
  dcp_load.py module DIR EXPECTED    one process: an nn.Module with
                                     parameters "w" and "b" and an AdamW
                                     over Strata's two groups load DIR
                                     through get_state_dict, dcp.load and
                                     set_state_dict; its parameters,
                                     moments, steps and learning rate are
                                     checked against EXPECTED

Exits non-zero, saying which key differs, on any mismatch. PyTorch 2.6.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dcp_save  # noqa: E402  (run_rank, shard)

import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.distributed.checkpoint.state_dict import (  # noqa: E402
    get_state_dict, set_state_dict)
from torch.distributed.tensor import Shard  # noqa: E402


def same_bytes(key, got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        sys.exit(f"{key}: {got.dtype} {tuple(got.shape)}, expected "
                 f"{want.dtype} {tuple(want.shape)}")
    if not torch.equal(got.view(torch.uint8) if got.dim() else
                       got.reshape(1).view(torch.uint8),
                       want.view(torch.uint8) if want.dim() else
                       want.reshape(1).view(torch.uint8)):
        sys.exit(f"{key}: values differ:\n{got}\nexpected\n{want}")


def load_sharded(mesh, directory, expected_path):
    expected = torch.load(expected_path, weights_only=True)
    state = {}
    expected.pop("lr", None)
    for key, want in expected.items():
        if want.dim() == 0:
            state[key] = torch.zeros_like(want)
        else:
            state[key] = dcp_save.shard(torch.zeros_like(want), mesh, Shard(0))
    dcp.load(state, checkpoint_id=directory)
    for key, want in expected.items():
        got = state[key]
        if want.dim() != 0:
            # Each rank checks its own shard: Gloo cannot gather bfloat16.
            rank = mesh.get_local_rank()
            pieces = list(torch.chunk(want, mesh.size(), dim=0))
            want = pieces[rank] if rank < len(pieces) else want[:0]
            got = got.to_local()
        same_bytes(key, got, want)


class Module(torch.nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros_like(w))
        self.b = torch.nn.Parameter(torch.zeros_like(b))


def load_module(rank, world, store, directory, expected_path):
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=world)
    try:
        expected = torch.load(expected_path, weights_only=True)
        model = Module(expected["model.w"], expected["model.b"])
        optim = torch.optim.AdamW(
            [{"params": [model.w], "weight_decay": 0.1},
             {"params": [model.b], "weight_decay": 0.0}], lr=1.0)
        model_sd, optim_sd = get_state_dict(model, optim)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=directory)
        set_state_dict(model, optim, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        same_bytes("model.w", model.w.detach(), expected["model.w"])
        same_bytes("model.b", model.b.detach(), expected["model.b"])
        for name, param in (("w", model.w), ("b", model.b)):
            s = optim.state[param]
            for k in ("exp_avg", "exp_avg_sq", "step"):
                key = f"optim.state.{name}.{k}"
                same_bytes(key, s[k].to(expected[key].dtype), expected[key])
        lr = expected["lr"].item()
        for g, group in enumerate(optim.param_groups):
            if group["lr"] != lr:
                sys.exit(f"param group {g}: lr {group['lr']}, expected {lr}")
        print("loaded", file=sys.stderr)
    finally:
        dist.destroy_process_group()


def main():
    mode, directory, expected = sys.argv[1:4]
    parent = os.path.dirname(os.path.abspath(expected))
    if mode == "sharded":
        dcp_save.spawn(parent, load_sharded, directory, expected)
    elif mode == "module":
        store = os.path.join(parent, "rendezvous_module")
        if os.path.exists(store):
            os.remove(store)
        load_module(0, 1, store, directory, expected)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
