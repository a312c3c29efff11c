"""Wall-clock share of the token-reduction operator inside a patched ViT's forward pass.

The papers' MAC columns count the transformer's matrix products and leave out what the reduction
itself costs (EViT: a [CLS] row and a weighted sum; BAT: pairwise distances of the inattentive tokens,
O(M^2 C), density, nearest denser token, assignment, weighted averages; ToMe: a bipartite similarity).
:class:`ReductionTimer` times, on the same forward passes, the whole forward, the scorer and the
reducer of a model patched by :func:`tokenprune.core.patch.patch` (their functions are wrapped while the
context is open; CUDA is synchronised around each timed region), so the share is measured, not
estimated. :func:`timed_benchmark` runs :func:`tokenprune.measure.throughput.benchmark` (interleaved rounds,
median images/s) with a timer on every patched model.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Optional

import torch

__all__ = ["ReductionTimer", "timed_benchmark"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ReductionTimer:
    """Context manager accumulating seconds spent in forward passes, the scorer and the reducer.

    Attributes after (or during) use: ``forward_s``, ``scorer_s``, ``reducer_s``, ``forwards`` (count),
    ``calls`` (reducer calls), ``per_forward`` (forward and operator seconds of each pass). ``share`` is
    ``(scorer_s + reducer_s) / forward_s``; ``reducer_share`` the reducer's part alone; :meth:`shares` the
    share of each pass (for an interval). Re-patching the model inside the context drops the wrappers.
    """

    def __init__(self, model: torch.nn.Module):
        st = getattr(model, "_tokenprune", None)
        if st is None:
            raise ValueError("model: not patched; ReductionTimer needs a model patched by tokenprune.patch")
        self.model = model
        self.state = st
        self.forward_s = self.scorer_s = self.reducer_s = 0.0
        self.forwards = self.calls = 0
        self.per_forward: list[tuple[float, float]] = []  # (forward seconds, scorer + reducer seconds) per pass
        self._op0 = 0.0
        self._saved = None
        self._handles: list = []
        self._t0: Optional[float] = None

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _wrap(self, fn, attr: str):
        def timed(*args, **kwargs):
            dev = self._device()
            _sync(dev)
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            _sync(dev)
            setattr(self, attr, getattr(self, attr) + time.perf_counter() - t0)
            if attr == "reducer_s":
                self.calls += 1
            return out
        return timed

    def __enter__(self) -> "ReductionTimer":
        st = self.state
        self._saved = (st.scorer, st.reducer)
        st.scorer = dataclasses.replace(st.scorer, fn=self._wrap(st.scorer.fn, "scorer_s"))
        st.reducer = dataclasses.replace(st.reducer, fn=self._wrap(st.reducer.fn, "reducer_s"))

        def pre(_m, _inp):
            _sync(self._device())
            self._op0 = self.scorer_s + self.reducer_s
            self._t0 = time.perf_counter()

        def post(_m, _inp, _out):
            _sync(self._device())
            dt = time.perf_counter() - self._t0
            self.forward_s += dt
            self.forwards += 1
            self.per_forward.append((dt, self.scorer_s + self.reducer_s - self._op0))

        self._handles = [self.model.register_forward_pre_hook(pre), self.model.register_forward_hook(post)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._saved is not None:
            self.state.scorer, self.state.reducer = self._saved
            self._saved = None

    @property
    def share(self) -> float:
        return (self.scorer_s + self.reducer_s) / self.forward_s if self.forward_s else float("nan")

    @property
    def reducer_share(self) -> float:
        return self.reducer_s / self.forward_s if self.forward_s else float("nan")

    def shares(self) -> list[float]:
        """Per forward pass: (scorer + reducer seconds) / forward seconds."""
        return [op / dt for dt, op in self.per_forward if dt > 0]

    def as_dict(self) -> dict:
        return {"forwards": self.forwards, "forward_s": self.forward_s, "scorer_s": self.scorer_s,
                "reducer_s": self.reducer_s, "reduction_share": self.share, "reducer_share": self.reducer_share,
                "shares_per_forward": self.shares()}


def timed_benchmark(models: dict[str, torch.nn.Module], **bench_kwargs) -> tuple[list, dict[str, dict]]:
    """:func:`tokenprune.measure.throughput.benchmark` with a :class:`ReductionTimer` on every patched model.

    Returns the benchmark results and, per label of a patched model, the timer's :meth:`ReductionTimer.as_dict`
    (warm-up passes included: a share is a ratio over the same passes).
    """
    from contextlib import ExitStack

    from tokenprune.measure.throughput import benchmark

    timers: dict[str, ReductionTimer] = {}
    with ExitStack() as stack:
        for label, m in models.items():
            if getattr(m, "_tokenprune", None) is not None:
                timers[label] = stack.enter_context(ReductionTimer(m))
        results = benchmark(models, **bench_kwargs)
    return results, {k: t.as_dict() for k, t in timers.items()}
