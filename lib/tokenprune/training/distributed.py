"""Distributed training under ``torchrun``: the rank, world size and local rank, the process group (``nccl`` on
CUDA, ``gloo`` on the CPU), the device of a rank, and the all-reduce both training stacks use. Writing files is the
caller's job, on rank 0 (:func:`is_main_process`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["DistInfo", "dist_info", "setup_distributed", "is_main_process", "barrier", "all_reduce_sum"]


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def dist_info() -> DistInfo:
    """Rank, world size and local rank from the initialised process group, else from torchrun's env."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))
    return DistInfo(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                    int(os.environ.get("LOCAL_RANK", 0)))


def _default_device(info: DistInfo) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", info.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def setup_distributed(device: Optional[str | torch.device] = None) -> tuple[DistInfo, torch.device]:
    """Initialise the process group when ``WORLD_SIZE > 1`` and none exists; pick the device.

    Backend: ``nccl`` for CUDA devices, ``gloo`` otherwise. Default device: ``cuda:LOCAL_RANK`` when a
    GPU is visible, else the CPU.
    """
    import torch.distributed as dist

    info = dist_info()
    dev = torch.device(device) if device is not None else _default_device(info)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", info.local_rank % max(1, torch.cuda.device_count()))
    if info.world_size > 1 and not dist.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        info = dist_info()
    return info, dev


def is_main_process() -> bool:
    """True on rank 0 (and in a plain, non-distributed run)."""
    return dist_info().rank == 0


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def all_reduce_sum(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """``t`` summed over the processes, in place (unchanged in a plain run)."""
    if info.distributed:
        import torch.distributed as dist

        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t
