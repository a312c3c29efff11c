"""The command line: ``python -m tokenprune COMMAND [options]`` (or ``tokenprune COMMAND``).

Commands:
  pipeline   run the notebooks with papermill and regenerate the reports and the claims ledger
  batch      run one notebook over many parameter sets (--jobs N, --shard i/n), each into its own folder
  report     rebuild or check the claims ledger from reports/*/results.json
  bench      EViT-style throughput of a patched timm model, settings side by side
  models     train, or load by recipe hash, the default profile's base models and cached results
  prepare    prepare the embedded datasets and the offline pretrained ViT-S/14
  train      training tools: the training bench (--bench) and the torchrun check (--ddp-check)
  paper-train  a paper's recipe on timm's training stack (GPU cluster; resumable; --estimate: GPU-hours)

``python -m tokenprune COMMAND --help`` describes each command's options.

Bad input (an unknown name, a value out of range, a missing or broken file) is refused before anything is
written, with one line on stderr, ``tokenprune COMMAND: error: ...``, and exit code 2; any other failure keeps
its traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from typing import Iterator, NoReturn, Optional, Sequence

from tokenprune.utils.io import InputError

COMMANDS = {
    "pipeline": "tokenprune.study.pipeline",
    "batch": "tokenprune.study.batch",
    "report": "tokenprune.study.ledger",
    "bench": "tokenprune.measure.bench_command",
    "models": "tokenprune.study.cached_results",
    "prepare": "tokenprune.data.prepare",
    "train": "tokenprune.training.train_cli",
    "paper-train": "tokenprune.study.paper_runs",
}

#: the project's errors, besides :class:`InputError`, that mean "a file the user provides is missing" (module,
#: class): their messages say where it belongs; looked up only once their module is loaded
MISSING_INPUT = (("tokenprune.data.datasets.errors", "DatasetNotFoundError"),
                 ("tokenprune.data.pretrained.wheel", "PretrainedWeightsMissing"))


def _refusal(err: BaseException) -> bool:
    """Whether ``err`` refuses the user's input (rather than failing the work)."""
    kinds = [getattr(sys.modules[m], n) for m, n in MISSING_INPUT if m in sys.modules]
    return isinstance(err, (InputError, *kinds))


def _argparse_error(self: argparse.ArgumentParser, message: str) -> NoReturn:
    raise InputError(message)


@contextlib.contextmanager
def _argparse_errors_as_input_errors() -> Iterator[None]:
    """While a command runs, an argparse error (``ap.error``, an unknown option, a bad choice) raises
    :class:`InputError` instead of printing the usage, so that it is reported like any refusal, on one line."""
    original = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = _argparse_error   # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.error = original   # type: ignore[method-assign]


def refuse(command: str, message: str) -> int:
    """Print ``tokenprune COMMAND: error: MESSAGE`` on one line of stderr; returns the exit code, 2."""
    print(f"tokenprune {command}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``COMMAND``. A refusal (an argparse error, an :class:`InputError`, a
    :class:`~tokenprune.utils.io.CheckpointError` among them, or one of :data:`MISSING_INPUT`) is printed on one
    line by :func:`refuse`; any other exception propagates with its traceback (a notebook that fails in the
    pipeline is reported by the pipeline itself, naming the notebook and the cell)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        return refuse("command", f"unknown {command!r}; accepted: {', '.join(COMMANDS)}")
    try:
        with _argparse_errors_as_input_errors():
            result = importlib.import_module(COMMANDS[command]).main(rest)
    except Exception as err:  # noqa: BLE001 - refusals on one line; any other failure keeps its traceback
        if not _refusal(err):
            raise
        return refuse(command, str(err))
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
