"""``python -m tokenprune models`` (``make models``): the training layer's base models and cached run outputs
(:func:`tokenprune.training.models_cli.main`, :data:`~tokenprune.training.models_cli.OUTPUT_BUILDERS`), then the
study's cached results (:data:`STUDY_BUILDERS`): what a notebook trains that is not a model of its own, cached so
that ``make reproduce`` loads it (the heads of notebook 04, :mod:`tokenprune.study.decoupling.cached_heads`; the
off-the-shelf sweeps of :mod:`tokenprune.study.cached_sweeps`).
"""
from __future__ import annotations

import sys
from typing import Callable, Optional, Sequence

from tokenprune.study import cached_sweeps
from tokenprune.study.decoupling import cached_heads
from tokenprune.training import models_cli

__all__ = ["STUDY_BUILDERS", "main"]

#: the study's producers of cached results, each called with the profile, ``progress`` and ``force``
STUDY_BUILDERS: tuple[Callable[..., list], ...] = (cached_heads.build_cached, cached_sweeps.build_cached)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """:func:`tokenprune.training.models_cli.main` with the study's builders after the training layer's."""
    return models_cli.main(argv, builders=models_cli.OUTPUT_BUILDERS + STUDY_BUILDERS)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
