"""``python -m tokenprune train``: the training bench (``--bench``, :func:`tokenprune.training.bench.bench_training`)
and the torchrun self-check of the training loop (``--ddp-check OUT_DIR``, run by the tests under ``torchrun``:
every rank trains a tiny ViT and saves its weights, which must end identical).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

import torch
import torch.nn as nn

from tokenprune.training.bench import bench_training, check_bench_setting, format_table
from tokenprune.training.distributed import barrier, dist_info
from tokenprune.training.loop import train
from tokenprune.training.recipe import TrainRecipe

__all__ = ["tiny_problem", "tiny_vit", "main"]


def tiny_problem(n: int = 512, size: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A tiny learnable problem: uint8 ``[n, 1, size, size]`` textures with noise; label 0: dark,
    1: bright, 2: horizontal stripes, 3: vertical stripes (every patch carries the class)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    r = torch.arange(size)
    stripes_h = ((r[:, None] % 2) * 200).expand(size, size)
    stripes_v = ((r[None, :] % 2) * 200).expand(size, size)
    base = torch.stack([torch.full((size, size), 40), torch.full((size, size), 180), stripes_h, stripes_v]).float()
    noise = torch.randn(n, 1, size, size, generator=g) * 25
    x = (base[y][:, None] + noise).clamp(0, 255).to(torch.uint8)
    return x, y


def tiny_vit(size: int = 8, num_classes: int = 4, depth: int = 4) -> nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(img_size=size, patch_size=2, in_chans=1, num_classes=num_classes, embed_dim=16,
                             depth=depth, num_heads=2, mlp_ratio=2.0)


def _ddp_check(out_dir: str) -> int:
    """Train a tiny ViT under torchrun; every rank saves its weights and history to ``out_dir``."""
    import torch.distributed as dist

    recipe = TrainRecipe(name="ddp-check", dataset="tiny", img_size=8, epochs=3, batch_size=32, lr=3e-3,
                         warmup_epochs=0.5, dtype="fp32", label_smoothing=0.0,
                         preprocess={"channels": 1, "mean": [0.5], "std": [0.5], "resize": "pad"},
                         augment={"hflip": False})
    torch.manual_seed(1234 + dist_info().rank)  # different init per rank: DDP must broadcast rank 0's
    model = tiny_vit()
    x, y = tiny_problem(256)
    res = train(recipe, model, (x, y), (x[:64], y[:64]), device="cpu", progress=False)
    info = dist_info()
    os.makedirs(out_dir, exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "losses": res.losses, "history": res.history,
                "world_size": res.world_size, "rank": info.rank}, os.path.join(out_dir, f"rank{info.rank}.pt"))
    barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokenprune train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", action="store_true", help="training throughput of the small ViT, settings side by side")
    ap.add_argument("--settings", nargs="+", default=None, help="bench settings (default: the five of bench_training)")
    ap.add_argument("--embed-dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="also write the bench rows to this JSON file")
    ap.add_argument("--ddp-check", metavar="OUT_DIR", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ddp_check:
        return _ddp_check(args.ddp_check)
    if not args.bench:
        ap.print_help()
        return 0
    for option in ("embed_dim", "heads", "batch", "rounds", "threads"):   # refused before any model is built
        value = getattr(args, option)
        if value is not None and value < 1:
            ap.error(f"--{option.replace('_', '-')}: expected an int >= 1, got {value}")
    for setting in args.settings or ():
        check_bench_setting(setting)
    kw = {} if args.settings is None else {"settings": tuple(args.settings)}
    load_before = round(os.getloadavg()[0], 2)
    rows = bench_training(embed_dim=args.embed_dim, num_heads=args.heads, batch=args.batch, rounds=args.rounds,
                          threads=args.threads, **kw)
    from tokenprune.utils.environment import hardware

    meta = dict(hardware(), batch=args.batch, embed_dim=args.embed_dim, depth=12, tokens=50,
                load_before=load_before, load_after=round(os.getloadavg()[0], 2))
    print(format_table(rows, meta))
    if args.json:
        from tokenprune.utils.io import write_json

        write_json(args.json, {"rows": rows, "meta": meta})
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
