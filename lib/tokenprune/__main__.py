"""The command line: ``python -m tokenprune COMMAND [options]`` (or ``tokenprune COMMAND``).

Commands:
  pipeline   run the notebooks with papermill and regenerate the reports and the claims ledger
  batch      run one notebook over many parameter sets (--jobs N, --shard i/n), each into its own folder
  report     rebuild or check the claims ledger from reports/*/results.json
  bench      EViT-style throughput of a patched timm model, settings side by side
  models     train, or load by recipe hash, the default profile's base models
  prepare    prepare the embedded datasets and the offline pretrained ViT-S/14
  train      training tools: the training bench (--bench) and the torchrun check (--ddp-check)
  paper-train  a paper's recipe on timm's training stack (GPU cluster; resumable; --estimate: GPU-hours)

``python -m tokenprune COMMAND --help`` describes each command's options.
"""
from __future__ import annotations

import importlib
import sys
from typing import Optional, Sequence

COMMANDS = {
    "pipeline": "tokenprune.study.pipeline",
    "batch": "tokenprune.study.batch",
    "report": "tokenprune.study.report",
    "bench": "tokenprune.measure.throughput",
    "models": "tokenprune.study.models_command",
    "prepare": "tokenprune.data.prepare",
    "train": "tokenprune.training.loop",
    "paper-train": "tokenprune.study.paper_runs",
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"command: unknown {command!r}; accepted: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    result = importlib.import_module(COMMANDS[command]).main(rest)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
