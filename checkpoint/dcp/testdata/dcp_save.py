"""Writes torch.distributed.checkpoint (DCP) directories with PyTorch's own
dcp.save, for checkpoint/dcp's interop tests.

  dcp_save.py version OUT            the torch version, to OUT
  dcp_save.py reference DIR          DIR/dcp: a state dict of every supported
                                     dtype and rank (0-d to 3-d), saved by 2
                                     Gloo ranks as DTensors sharded on dim 0,
                                     on dim 1 or replicated, plus non-tensor
                                     values; DIR/expected.pt: the same
                                     tensors whole (torch.save);
                                     DIR/{versioned,transformed,escaping}:
                                     its .metadata altered
  dcp_save.py weights IN DIR         the tensors of IN (a torch.save'd dict of
                                     a Strata model's parameters) saved by 2
                                     Gloo ranks, each tensor sharded on dim 0:
                                     DIR/nested as {"model": ..., "optim":
                                     {"state": AdamW-like moments by name,
                                     "param_groups": ...}} (get_state_dict's
                                     layout), DIR/flat as they are

Runs on the CPU (Gloo); PyTorch 2.6 is the version the tests expect.
"""
import os
import sys

import pickle

import torch

if __name__ == "__main__" and sys.argv[1] == "version":
    # Before importing what PyTorch 1.13 lacks (torch.distributed.tensor).
    with open(sys.argv[2], "w") as f:
        f.write(torch.__version__.split("+")[0])
    sys.exit(0)

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard


def reference_tensors():
    """name -> (tensor, placement); values i * 0.25 - 3 over arange."""
    def values(shape, dtype):
        n = 1
        for d in shape:
            n *= d
        t = torch.arange(n, dtype=torch.float64).mul(0.25).sub(3)
        if dtype == torch.bool:
            return (torch.arange(n) % 3 == 0).reshape(shape)
        return t.to(dtype).reshape(shape)

    return {
        "f32_rows": (values([7, 5], torch.float32), Shard(0)),
        "f32_cols": (values([3, 9], torch.float32), Shard(1)),
        "f64_3d": (values([3, 4, 5], torch.float64), Shard(1)),
        "bf16": (values([11], torch.bfloat16), Shard(0)),
        "f16": (values([2, 3], torch.float16), Replicate()),
        "i64": (values([5, 2], torch.int64), Shard(0)),
        "i32": (values([4], torch.int32), Shard(0)),
        "i16": (values([3], torch.int16), Replicate()),
        "i8": (values([6], torch.int8), Shard(0)),
        "u8": (values([2, 2], torch.uint8) + 10, Shard(1)),
        "bool": (values([5], torch.bool), Shard(0)),
        "scalar": (values([], torch.float32), Replicate()),
        "one_row": (values([1, 6], torch.float32), Shard(0)),
    }


def run_rank(rank, world, store, body, args):
    # A file rendezvous: Debian's PyTorch has no libuv for TCPStore.
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        body(mesh, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def spawn(store_dir, body, *args):
    store = os.path.join(store_dir, "rendezvous")
    if os.path.exists(store):
        os.remove(store)
    mp.spawn(run_rank, args=(2, store, body, args), nprocs=2, join=True)


def shard(tensor, mesh, placement):
    """This rank's DTensor of `tensor` (torch.chunk's split, as Shard's),
    without communication (Gloo has no collectives for bool or int16)."""
    local = tensor
    if isinstance(placement, Shard):
        pieces = list(torch.chunk(tensor, mesh.size(), dim=placement.dim))
        rank = mesh.get_local_rank()
        if rank < len(pieces):
            local = pieces[rank]
        else:
            size = list(tensor.shape)
            size[placement.dim] = 0
            local = tensor.new_empty(size)
    return DTensor.from_local(local.clone(), mesh, [placement],
                              run_check=False, shape=tensor.shape,
                              stride=tensor.stride())


def save_reference(mesh, out):
    state = {name: shard(t, mesh, p)
             for name, (t, p) in reference_tensors().items()}
    state["step"] = 42
    state["lr"] = 0.5
    state["note"] = "dcp"
    dcp.save(state, checkpoint_id=os.path.join(out, "dcp"))


def save_weights(mesh, src, out):
    tensors = torch.load(src, weights_only=True)
    model = {k: shard(v, mesh, Shard(0) if v.dim() else Replicate())
             for k, v in tensors.items()}
    # get_state_dict's optimizer layout: state by parameter name (AdamW's
    # moments sharded as the parameters, a replicated step), param groups.
    optim_state = {
        k: {"exp_avg": shard(v.mul(0.5), mesh, Shard(0)),
            "exp_avg_sq": shard(v.mul(v), mesh, Shard(0)),
            "step": torch.tensor(3.0)}
        for k, v in tensors.items() if v.dim()}
    nested = {"model": model,
              "optim": {"state": optim_state,
                        "param_groups": [{"lr": 0.001,
                                          "params": list(model)}]}}
    dcp.save(nested, checkpoint_id=os.path.join(out, "nested"))
    dcp.save(model, checkpoint_id=os.path.join(out, "flat"))


def write_altered_metadata(out):
    """DIR/<case>/.metadata: the reference's metadata altered as a newer
    PyTorch (a version field, item transforms) or a crafted file (an item
    outside the directory) would have it."""
    def write(case, alter):
        with open(os.path.join(out, "dcp", ".metadata"), "rb") as f:
            metadata = pickle.load(f)
        alter(metadata)
        os.makedirs(os.path.join(out, case))
        with open(os.path.join(out, case, ".metadata"), "wb") as f:
            pickle.dump(metadata, f)

    def first_item(metadata):
        return next(iter(metadata.storage_data.values()))

    write("versioned", lambda m: setattr(m, "version", "1.0.0"))
    write("transformed",
          lambda m: setattr(first_item(m), "transform_descriptors", ["zstd"]))
    write("escaping",
          lambda m: setattr(first_item(m), "relative_path", "../secret"))


def main():
    mode = sys.argv[1]
    if mode == "reference":
        out = sys.argv[2]
        torch.save({k: t for k, (t, _) in reference_tensors().items()},
                   os.path.join(out, "expected.pt"))
        spawn(out, save_reference, out)
        write_altered_metadata(out)
    elif mode == "weights":
        # The rendezvous file lives in DIR: a missing DIR would hang it.
        os.makedirs(sys.argv[3], exist_ok=True)
        spawn(sys.argv[3], save_weights, sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
