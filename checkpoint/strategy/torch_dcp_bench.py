"""PyTorch's own torch.distributed.checkpoint on the state of a DCP
directory, for checkpoint_benchmark's side-by-side figures.

  torch_dcp_bench.py DIR OUT RANKS   RANKS Gloo ranks hold DIR's tensors as
                                     DTensors sharded on dim 0 (as ZeRO-2
                                     and FSDP shard), then time: a cold
                                     dcp.load of DIR; dcp.save of the same
                                     state into OUT (files synced, as
                                     dcp.save does by default); a cold
                                     dcp.load of OUT. Prints one line:
                                     "load_dir_s save_s load_s bytes torch_version".

Cold: every file's pages are dropped from the page cache before a load
(posix_fadvise DONTNEED after fdatasync; no root needed). PyTorch >= 2.4.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard


def drop_cache(path):
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def state_of(directory, mesh):
    """Zeroed DTensors (plain tensors for scalars) of every tensor key."""
    metadata = dcp.FileSystemReader(directory).read_metadata()
    rank, world = mesh.get_local_rank(), mesh.size()
    state = {}
    for key, md in metadata.state_dict_metadata.items():
        if not hasattr(md, "size"):
            continue
        if len(md.size) == 0:
            state[key] = torch.zeros((), dtype=md.properties.dtype)
            continue
        pieces = list(torch.chunk(torch.empty(md.size, device="meta"), world))
        rows = pieces[rank].shape[0] if rank < len(pieces) else 0
        local = torch.zeros((rows,) + tuple(md.size[1:]),
                            dtype=md.properties.dtype)
        state[key] = DTensor.from_local(local, mesh, [Shard(0)],
                                        run_check=False, shape=md.size,
                                        stride=torch.empty(md.size,
                                                           device="meta")
                                        .stride())
    return state


def timed(fn):
    dist.barrier()
    start = time.perf_counter()
    fn()
    dist.barrier()
    return time.perf_counter() - start


def run_rank(rank, world, store, directory, out, result):
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        state = state_of(directory, mesh)
        if rank == 0:
            drop_cache(directory)
        load_dir = timed(lambda: dcp.load(state, checkpoint_id=directory))
        save = timed(lambda: dcp.save(state, checkpoint_id=out))
        if rank == 0:
            drop_cache(out)
        load = timed(lambda: dcp.load(state, checkpoint_id=out))
        if rank == 0:
            size = sum(os.path.getsize(os.path.join(r, f))
                       for r, _, fs in os.walk(out) for f in fs)
            with open(result, "w") as f:
                f.write(f"{load_dir:.6f} {save:.6f} {load:.6f} {size} "
                        f"{torch.__version__.split('+')[0]}\n")
    finally:
        dist.destroy_process_group()


def main():
    directory, out, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = out + ".rendezvous"
    if os.path.exists(store):
        os.remove(store)
    result = out + ".result"
    mp.spawn(run_rank, args=(ranks, store, directory, out, result),
             nprocs=ranks, join=True)
    if os.path.exists(store):  # Gloo's FileStore removes it when done.
        os.remove(store)
    with open(result) as f:
        print(f.read().strip())
    os.remove(result)


if __name__ == "__main__":
    main()
