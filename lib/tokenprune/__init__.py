"""tokenprune: token pruning for timm Vision Transformers, and the study that audits four papers' claims.

The public API::

    import timm, tokenprune
    model = timm.create_model("deit_small_patch16_224")
    tokenprune.patch(model, keep_rate=0.7)            # EViT: blocks 4/7/10, [CLS] attention, fused token
    model.keep_rate = 0.5                             # the one knob
    tokenprune.analytic_macs(model).total             # MACs of what the model computes
    tokenprune.prune_state(model).token_counts        # tokens leaving each block in the last forward pass
    tokenprune.export_onnx(model, "model.onnx")       # ONNX, checked against the eager model on ONNX Runtime

Packages by role, imports pointing down only: ``utils`` (I/O, provenance) < ``core`` (the patch, the
scorer and reducer registries, schedules, precision) < ``methods`` (one module per paper's method,
each registering its scorers and reducers) < ``measure`` (MACs, throughput, metrics, evaluation) and
``data`` < ``training`` < ``study`` (profiles, verdicts, reports, the pipeline; used by the notebooks
and the command line only). Importing ``tokenprune`` registers every method.
"""
from tokenprune.core.patch import patch, prune_state
from tokenprune.core.state import PruneState
from tokenprune.core.reducers import REDUCERS, get_reducer, register_reducer
from tokenprune.core.scorers import SCORERS, get_scorer, register_scorer, scorer_names
from tokenprune.core.schedule import EVIT_LOCATIONS, Schedule
from tokenprune import methods  # noqa: F401  (registers the methods' scorers and reducers)
from tokenprune.measure.macs import MacCount, analytic_macs, keep_rate_for_macs, measured_macs
from tokenprune.measure.throughput import BenchResult, benchmark
from tokenprune.measure.export import OnnxExport, export_onnx

__all__ = [
    "patch",
    "prune_state",
    "PruneState",
    "SCORERS",
    "REDUCERS",
    "register_scorer",
    "register_reducer",
    "get_scorer",
    "get_reducer",
    "scorer_names",
    "EVIT_LOCATIONS",
    "Schedule",
    "MacCount",
    "analytic_macs",
    "measured_macs",
    "keep_rate_for_macs",
    "BenchResult",
    "benchmark",
    "OnnxExport",
    "export_onnx",
]
