"""papermill batches: one notebook run over many parameter sets, each member into its own folder.

A batch file (YAML) names the notebook, the profile and the members, as a list of parameter sets and/or
a grid whose Cartesian product is added::

    notebook: 01_evit
    profile: smoke
    members:
      - {eval_images: 64}
    grid:
      finetune_seeds: [[0, 1, 2], [3, 4, 5]]
      batch: [2, 4]

A member's identity is a hash of the notebook file, the profile and its parameters, so reruns and shards
agree on what is done. Each member runs into ``OUT/<notebook>-<id>/`` (the executed notebook, its HTML,
tables, figures and results.json, swapped in only when the run succeeded); a member whose results.json
exists is skipped; a failed member is reported and neither stops nor corrupts the others. Unlike a pipeline run,
a batch does not hold ``OUT`` as a whole (:func:`~tokenprune.utils.io.folder_lock`): its parallel jobs, and its
shards on other machines, write distinct member folders side by side. ``OUT/index.md``
and ``OUT/index.json`` list every member with its parameters, status and verdict counts.
``--jobs N`` runs members in parallel; ``--shard i/n`` runs the members whose id falls in shard ``i`` of
``n`` (``int(id, 16) % n == i``), so a SLURM job array (``--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT``)
or any queue spreads a batch over machines without a launcher of ours.

Usage::

    python -m tokenprune batch sweep.yaml --out runs/sweep --jobs 2
    python -m tokenprune batch sweep.yaml --out /shared/sweep --shard 3/8
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import yaml

from tokenprune.study.params import check_overrides, check_profile
from tokenprune.study.pipeline import KERNEL_NAME, discover, ensure_kernel, output_folder, run_notebook
from tokenprune.study.report import RESULTS_FILE, VERDICTS
from tokenprune.utils.environment import REPO_ROOT
from tokenprune.utils.io import InputError, atomic_write_text, input_checks, write_json

__all__ = ["Member", "load_batch", "members_of", "shard", "check_jobs", "run_batch", "main"]


@dataclass(frozen=True)
class Member:
    """One parameter set of a batch; ``id`` hashes the notebook's bytes, the profile and the parameters."""

    notebook: Path
    profile: str
    params: Mapping[str, Any]
    id: str

    @property
    def folder_name(self) -> str:
        return f"{self.notebook.stem}-{self.id}"


def member_id(notebook: Path, profile: str, params: Mapping[str, Any]) -> str:
    h = hashlib.sha256(notebook.read_bytes())
    h.update(json.dumps({"profile": profile, "params": params}, sort_keys=True, default=str).encode())
    return h.hexdigest()[:12]


def load_batch(path: str | Path) -> dict[str, Any]:
    """The batch file as a dict, its keys checked (``notebook``, ``profile``, ``members`` and/or ``grid``);
    InputError naming the file when it is missing, not YAML or not such a mapping."""
    if not Path(path).is_file():
        raise InputError(f"batch file {path}: not found")
    try:
        spec = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or type(err).__name__
        raise InputError(f"batch file {path}: not YAML ({problem})") from None
    if not isinstance(spec, dict):
        raise InputError(f"batch file {path}: expected a mapping with notebook, profile, members and/or grid")
    unknown = set(spec) - {"notebook", "profile", "members", "grid"}
    if unknown:
        raise InputError(f"batch file {path}: unknown keys {sorted(unknown)}; "
                         f"accepted: notebook, profile, members, grid")
    if "notebook" not in spec:
        raise InputError(f"batch file {path}: 'notebook' is required (a stem or number, e.g. 01_evit)")
    if not spec.get("members") and not spec.get("grid"):
        raise InputError(f"batch file {path}: needs 'members' (a list of parameter sets) or 'grid' (lists to combine)")
    return spec


def members_of(spec: Mapping[str, Any], notebooks_dir: Path) -> list[Member]:
    """Every member of a batch, each parameter set checked against the notebook's profile table."""
    (nb,) = discover(notebooks_dir, [str(spec["notebook"])])
    profile = check_profile(spec.get("profile", "default"))
    members = spec.get("members") or []
    if not isinstance(members, list) or not all(isinstance(m, Mapping) for m in members):
        raise InputError(f"members: expected a list of parameter sets (mappings), got {members!r}")
    sets = [dict(m) for m in members]
    grid = spec.get("grid") or {}
    if grid:
        if not isinstance(grid, Mapping) or not all(isinstance(v, list) and v for v in grid.values()):
            raise InputError("grid: expected a mapping of parameter names to non-empty lists of values")
        keys = sorted(grid)
        sets += [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]
    out, seen = [], set()
    for params in sets:
        check_overrides(nb.stem, profile, params)
        mid = member_id(nb, profile, params)
        if mid not in seen:
            seen.add(mid)
            out.append(Member(nb, profile, params, mid))
    return out


def shard(members: Sequence[Member], spec: Optional[str]) -> list[Member]:
    """The members of shard ``i/n`` (``int(id, 16) % n == i``; shards count from 0), or all of them for None."""
    if spec is None:
        return list(members)
    try:
        i, n = (int(v) for v in spec.split("/"))
    except ValueError:
        raise InputError(f"shard: expected i/n with integers 0 <= i < n, got {spec!r}") from None
    if not 0 <= i < n:
        raise InputError(f"shard: expected i/n with 0 <= i < n (shards count from 0), got {spec!r}")
    return [m for m in members if int(m.id, 16) % n == i]


def _summary(out: Path, member: Member, status: str, seconds: Optional[float], message: str = "") -> dict:
    row: dict[str, Any] = {"id": member.id, "folder": member.folder_name, "params": dict(member.params),
                           "status": status, "seconds": None if seconds is None else round(seconds, 1),
                           "message": message}
    res = out / member.folder_name / RESULTS_FILE
    if res.exists():
        claims = json.loads(res.read_text())["claims"]
        row["verdicts"] = {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}
    return row


def write_index(out: Path, members: Sequence[Member], rows: Mapping[str, dict]) -> Path:
    """``index.json`` and ``index.md``: every member of the batch (also those of other shards, as pending)."""
    listed = [rows.get(m.id) or _summary(out, m, "done" if (out / m.folder_name / RESULTS_FILE).exists()
                                         else "pending", None) for m in members]
    write_json(out / "index.json", {"members": listed})
    lines = ["# Batch index", "", "<!-- generated by python -m tokenprune batch; never edit by hand -->", "",
             "| member | parameters | status | " + " | ".join(VERDICTS) + " |",
             "|---|---|---|" + "---:|" * len(VERDICTS)]
    for r in listed:
        counts = r.get("verdicts") or {}
        link = f"[{r['folder']}]({r['folder']}/{RESULTS_FILE})" if counts else r["folder"]
        lines.append(f"| {link} | `{json.dumps(r['params'], sort_keys=True)}` | {r['status']} | "
                     + " | ".join(str(counts.get(v, "")) for v in VERDICTS) + " |")
    return atomic_write_text(out / "index.md", "\n".join(lines) + "\n")


def check_jobs(jobs: Any) -> int:
    """``jobs``, members run at once: an int >= 1 (InputError otherwise)."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise InputError(f"jobs: expected an int >= 1, got {jobs!r}")
    return jobs


def run_batch(members: Sequence[Member], out: Path, jobs: int = 1, selected: Optional[Sequence[Member]] = None,
              kernel: str = KERNEL_NAME) -> dict[str, dict]:
    """Run the ``selected`` members (default: all) not done yet into ``out``; returns a row per member run or
    skipped."""
    check_jobs(jobs)
    out.mkdir(parents=True, exist_ok=True)
    todo = list(members if selected is None else selected)
    rows: dict[str, dict] = {}

    def one(m: Member) -> dict:
        if (out / m.folder_name / RESULTS_FILE).exists():
            return _summary(out, m, "skipped (done)", None)
        run = run_notebook(m.notebook, out, m.profile, dict(m.params), kernel, name=m.folder_name)
        print(f"[tokenprune batch] {m.folder_name}: {'ok' if run.ok else 'FAILED'} in {run.seconds:.0f} s"
              f"{': ' + run.message if run.message else ''}", flush=True)
        return _summary(out, m, "done" if run.ok else "failed", run.seconds, run.message)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for m, row in zip(todo, pool.map(one, todo)):
            rows[m.id] = row
    write_index(out, members, rows)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokenprune batch", description=__doc__.split("\n\n")[0])
    ap.add_argument("batch_file", type=Path, help="YAML file: notebook, profile, members and/or grid")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: runs/batch-<file stem>)")
    ap.add_argument("--jobs", type=int, default=1, help="members run in parallel on this machine (default: 1)")
    ap.add_argument("--shard", default=None, help="i/n: run only the members of shard i of n (0-based)")
    ap.add_argument("--notebooks", type=Path, default=REPO_ROOT / "notebooks")
    args = ap.parse_args(argv)
    with input_checks():   # the batch file, every member's parameters, the shard, the jobs and the output folder
        members = members_of(load_batch(args.batch_file), args.notebooks)
        selected = shard(members, args.shard)
        check_jobs(args.jobs)
        out = output_folder(args.out or REPO_ROOT / "runs" / f"batch-{args.batch_file.stem}", "--out")
    print(f"[tokenprune batch] {len(selected)} of {len(members)} members selected; output {out}", flush=True)
    rows = run_batch(members, out, args.jobs, selected, ensure_kernel())
    failed = [r for r in rows.values() if r["status"] == "failed"]
    for r in failed:
        print(f"  failed: {r['folder']}: {r['message']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
