"""torchrun with its rendezvous store on c10d's classic TCPStore backend.

PyTorch 2.4 made libuv TCPStore's default backend, and torchrun's static
rendezvous asks for it whatever USE_LIBUV says (pytorch/pytorch#148283), so on
a PyTorch built without libuv, as Debian 13's 2.6 is, torchrun fails with
"use_libuv was requested but PyTorch was build without libuv support". This
runs torchrun unchanged except that the rendezvous store uses the classic
backend, the one Strata's ranks use. On PyTorch before 2.4 (no libuv option)
it is plain torchrun.

  python3 launch/torchrun_classic_store.py --nproc_per_node=2 --no_python \
      bazel-bin/launch/train/train --strategy=ddp
"""

import sys

import torch.distributed as dist
from torch.distributed.elastic.rendezvous import static_tcp_rendezvous


class _ClassicTCPStore(dist.TCPStore):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("use_libuv", False)
        super().__init__(*args, **kwargs)


if hasattr(dist.TCPStore, "libuvBackend"):
    static_tcp_rendezvous.TCPStore = _ClassicTCPStore

from torch.distributed.run import main  # noqa: E402  (after the patch)

if __name__ == "__main__":
    sys.exit(main())
