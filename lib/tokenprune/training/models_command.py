"""``python -m tokenprune models`` (``make models``): the base models and cached fine-tunes of
:mod:`tokenprune.training.base_models`, then the fine-tuning runs cached as their outputs
(:mod:`tokenprune.training.run_outputs`), which start from those models, the proxy candidates measured off the shelf
and their K5 fine-tunes: :data:`OUTPUT_BUILDERS`."""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

from tokenprune.training import base_models, cached_finetunes
from tokenprune.training.proxy import finetunes as proxy_finetunes, outputs as proxy_outputs

__all__ = ["OUTPUT_BUILDERS", "main"]

#: the producers of cached run outputs, each called with the profile, ``progress`` and ``force``
OUTPUT_BUILDERS: tuple[Callable[..., list], ...] = (
    cached_finetunes.build_cached, proxy_outputs.build, proxy_finetunes.build)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The base models, then each builder of :data:`OUTPUT_BUILDERS`; with ``--max-minutes M`` no new model and no
    further builder starts after M minutes (each builder is one unit: the longest, notebook 03's fine-tunes, took
    44 min here), and a rerun of the same command continues: everything built is cached as it completes."""
    args = base_models.build_parser().parse_args(argv)
    start = time.monotonic()
    rc = base_models.main(argv)
    if rc == 0 and not args.list and args.only is None and base_models.is_main_process():
        for i, build in enumerate(OUTPUT_BUILDERS):
            if args.max_minutes is not None and time.monotonic() - start > 60 * args.max_minutes:
                left = [f"{b.__module__.removeprefix('tokenprune.training.')}.{b.__name__}"
                        for b in OUTPUT_BUILDERS[i:]]
                print(f"[models] --max-minutes {args.max_minutes:g} reached: the cached outputs of {', '.join(left)} "
                      "are left; rerun the same command to continue", flush=True)
                break
            build(profile=args.profile, progress=not args.no_progress, force=args.force)
    return rc
