"""The fine-tunes that would decide the fine-tuned claims of notebooks 01 and 03 on a classification model that has
none cached (a proxy notebook 00 chose after ``make models`` built the cached fine-tunes of another model): which runs
(conditions x seeds, the training images of each, what trains), about how long they would take on this project's
CPU, and the premise that files those claims ``not testable here`` while they are missing
(:data:`~tokenprune.study.proxy.audit_model.MOVED`: with no fine-tune there is none shown to have moved the model).

What trains: on a pre-registered candidate, what its K5 fine-tunes train (:func:`tokenprune.training.proxy.finetunes.
trainable`: blocks 4-12, the final norm and the head); on any other model, what the study's fine-tunes of it train
(:func:`tokenprune.training.finetune.finetune_trainable`). The estimate divides the training images of every run by
the training speeds the candidate's round was sized with (``SIZED_FROM`` of :mod:`tokenprune.training.proxy.round2`
or :mod:`~tokenprune.training.proxy.round3`: blocks 4-12 trained at the candidate's input size, measured by ``python
-m tokenprune bench`` on this project's 2-core CPU): a pruned run at the speed measured at keep 0.7, an unpruned one
at the unpruned speed; evaluating the runs is not counted. A model whose round sized no speeds has no estimate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tokenprune.study import verdicts
from tokenprune.study.proxy import chosen
from tokenprune.study.proxy.audit_model import MOVED

__all__ = ["NeededFinetunes", "trained_words", "sizing_speeds", "needed"]


def trained_words(trainable: Optional[Sequence[str]]) -> str:
    """What the parameter-name prefixes ``trainable`` train, in words: ``blocks 4-12, norm, fc_norm, head`` (blocks
    1-based); ``every weight`` for None."""
    if trainable is None:
        return "every weight"
    blocks = sorted(int(p.split(".")[1]) + 1 for p in trainable if p.startswith("blocks."))
    run = blocks and blocks == list(range(blocks[0], blocks[-1] + 1))
    named = ([f"blocks {blocks[0]}-{blocks[-1]}" if len(blocks) > 1 else f"block {blocks[0]}"] if run else
             [f"block {b}" for b in blocks])
    return ", ".join(named + [p.rstrip(".") for p in trainable if not p.startswith("blocks.")])


def sizing_speeds(base: str) -> Optional[tuple[float, float, str]]:
    """``(unpruned, pruned at keep 0.7, where from)``: the training images/s of blocks 4-12 that ``base``'s round was
    sized with at its input size (a smoke model: its default one's), or None when ``base`` is not a candidate of a
    sized round."""
    from tokenprune.training.proxy import round2, round3

    c = chosen._candidate(base)
    sized = {2: round2.SIZED_FROM, 3: round3.SIZED_FROM}.get(c.round) if c is not None else None
    if sized is None or c.img_size not in sized["train_img_per_s"]:
        return None
    return (sized["train_img_per_s"][c.img_size], sized["pruned_train_img_per_s"][c.img_size],
            f"round {c.round}'s sizing speeds at {c.img_size} px, SIZED_FROM")


@dataclass(frozen=True)
class NeededFinetunes:
    """The fine-tunes of ``base`` that would decide a notebook's fine-tuned claims: one run per condition of
    ``conditions`` (``(name, pruned)``) and seed of ``seeds``, named by ``pattern``, each over ``images`` training
    images, training ``trainable`` (None: every weight); ``hours``: the estimated wall-hours of their training on
    this project's CPU (None: no sizing speeds), from ``sized_from``."""

    base: str
    conditions: tuple[tuple[str, bool], ...]
    seeds: tuple[int, ...]
    images: int
    trainable: Optional[tuple[str, ...]]
    pattern: str
    hours: Optional[float]
    sized_from: str

    @property
    def runs(self) -> int:
        return len(self.conditions) * len(self.seeds)

    def text(self) -> str:
        """The runs in one short clause (a failed premise's detail): count, images, blocks trained, hours."""
        blocks = trained_words(self.trainable).split(", ")[0]
        hours = "no sizing speeds for it" if self.hours is None else f"about {self.hours:.1f} h here"
        return (f"none cached: {self.runs} runs ({len(self.conditions)} conditions x {len(self.seeds)} seeds) of "
                f"{self.images:,} images, {blocks} trained, {hours}")

    def premise(self) -> verdicts.Premise:
        """:data:`~tokenprune.study.proxy.audit_model.MOVED`, failed as ``not testable here``: no fine-tune of
        ``base`` is cached, and these runs would decide."""
        return verdicts.Premise(MOVED, False, self.text(), fails_as=verdicts.NOT_TESTABLE)

    def record(self) -> dict[str, Any]:
        """The runs for a claim's details."""
        return {"fine-tunes that would decide": self.pattern, "base model": self.base,
                "conditions": [name for name, _ in self.conditions], "seeds": list(self.seeds),
                "training images each": self.images, "trained": trained_words(self.trainable),
                "estimated training hours on this CPU": None if self.hours is None else round(self.hours, 2),
                "estimate from": self.sized_from}


def needed(base: str, conditions: Sequence[tuple[str, bool]], seeds: Sequence[int], images: int,
           pattern: str) -> NeededFinetunes:
    """The runs of ``conditions`` (``(name, pruned)``) x ``seeds`` of ``images`` training images each on ``base``,
    what they train (the module docstring) and the estimate of their training time."""
    from tokenprune.training import finetune
    from tokenprune.training.proxy import finetunes as proxy_finetunes

    trainable = proxy_finetunes.trainable() if chosen._candidate(base) is not None else \
        finetune.finetune_trainable(base)
    speeds = sizing_speeds(base)
    hours = None if speeds is None else len(seeds) * sum(
        images / (speeds[1] if pruned else speeds[0]) for _, pruned in conditions) / 3600
    return NeededFinetunes(base=base, conditions=tuple((n, bool(p)) for n, p in conditions), seeds=tuple(seeds),
                           images=int(images), trainable=None if trainable is None else tuple(trainable),
                           pattern=pattern, hours=hours, sized_from="" if speeds is None else speeds[2])
