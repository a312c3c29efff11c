"""``python -m tokenprune models`` (``make models``): the base models and cached fine-tunes of
:mod:`tokenprune.training.base_models`, then the fine-tuning runs cached as their outputs
(:mod:`tokenprune.training.run_outputs`), which start from those models, the proxy candidates measured off the shelf
and their K5 fine-tunes: :data:`OUTPUT_BUILDERS`."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from tokenprune.training import base_models, cached_finetunes, proxy_finetunes, proxy_outputs

__all__ = ["OUTPUT_BUILDERS", "main"]

#: the producers of cached run outputs, each called with the profile, ``progress`` and ``force``
OUTPUT_BUILDERS: tuple[Callable[..., list], ...] = (
    cached_finetunes.build_cached, proxy_outputs.build, proxy_finetunes.build)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = base_models.build_parser().parse_args(argv)
    rc = base_models.main(argv)
    if rc == 0 and not args.list and args.only is None and base_models.is_main_process():
        for build in OUTPUT_BUILDERS:
            build(profile=args.profile, progress=not args.no_progress, force=args.force)
    return rc
