"""Run the study's notebooks with papermill and regenerate ``reports/``.

Parameters given with ``-p NAME VALUE`` are checked against every selected notebook's profile table
(:func:`tokenprune.study.params.setup`), with the profile, the notebooks and the output folder, before anything
is written (a refusal is an :class:`~tokenprune.utils.io.InputError`). For each ``notebooks/NN_name.ipynb``:
execute it into a staging folder (``reports/.staging-NN_name``) with ``profile``, ``overrides`` (the
``-p`` values) and ``report_dir`` injected, export the executed notebook to HTML, check that it
wrote ``results.json``, add its findings (:func:`tokenprune.study.publish.publish`), then swap the staging folder in
for ``reports/NN_name``. A notebook that fails leaves the previous report untouched; the runner says which
notebook and which cell failed and exits non-zero. A run holds its reports folder for its whole life
(:func:`~tokenprune.utils.io.folder_lock`): a second run into the same folder meanwhile is refused, so that it never
deletes the first one's staging folder; a killed run holds nothing. Finally ``reports/README.md`` (the claims
ledger) is rebuilt from every ``results.json``, with the study page ``reports/index.html``
(:mod:`tokenprune.study.site`) and, for the committed reports, the README's findings section.

Usage::

    python -m tokenprune pipeline                      # every notebook, default profile
    python -m tokenprune pipeline --profile smoke --only 01_evit --reports /tmp/r -p batch 4
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import yaml

from tokenprune.study.params import check_overrides, check_profile
from tokenprune.study.ledger import write_ledger
from tokenprune.study.publish import MARKERS, publish, readme_findings, replace_between_markers
from tokenprune.study.site import write_site
from tokenprune.study.report import reports_dir_for
from tokenprune.utils.environment import REPO_ROOT
from tokenprune.utils.io import InputError, atomic_write_text, folder_lock, input_checks

__all__ = ["KERNEL_NAME", "NotebookRun", "ensure_kernel", "discover", "parse_parameters", "output_folder",
           "run_notebook", "main"]

KERNEL_NAME = "tokenprune"


def ensure_kernel(name: str = KERNEL_NAME) -> str:
    """Make sure a Jupyter kernel ``name`` that runs *this* interpreter exists (installed into sys.prefix)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    ksm = KernelSpecManager()
    try:
        spec = ksm.get_kernel_spec(name)
        if Path(spec.argv[0]).resolve() == Path(sys.executable).resolve():
            return name
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(kernel_name=name, display_name=f"Python ({name})", prefix=sys.prefix)
    return name


def discover(notebooks_dir: Path, only: Optional[Sequence[str]] = None) -> list[Path]:
    """Notebooks ``NN_name.ipynb`` in order; ``only`` selects by stem or by number prefix (InputError naming an
    unknown one)."""
    found = sorted(p for p in notebooks_dir.glob("[0-9][0-9]_*.ipynb"))
    if only:
        names = {p.stem: p for p in found}
        picked = []
        for o in only:
            match = [p for s, p in names.items() if s == o or s.split("_", 1)[0] == o]
            if not match:
                raise InputError(f"only: no notebook {o!r}; accepted: {sorted(names)}")
            picked += match
        found = picked
    return found


@dataclass
class NotebookRun:
    name: str
    ok: bool
    seconds: float
    message: str = ""


def _failure_message(nb_name: str, err: Exception) -> str:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(err, PapermillExecutionError):
        return (f"notebook {nb_name} failed in cell {err.cell_index} (execution count {err.exec_count}): "
                f"{err.ename}: {err.evalue}")
    return f"notebook {nb_name} failed: {type(err).__name__}: {err}"


def run_notebook(nb: Path, reports_dir: Path, profile: str, parameters: Optional[dict] = None,
                 kernel: str = KERNEL_NAME, name: Optional[str] = None) -> NotebookRun:
    """Execute one notebook into staging and swap it in for ``reports_dir/<name>`` (default name: the
    notebook's stem) only when it succeeded; ``parameters`` arrive in the notebook as ``overrides``."""
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter

    name = name or nb.stem
    final = reports_dir / name
    staging = reports_dir / f".staging-{name}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    # the notebook runs in its staging folder and writes its report there (``report_dir = "."``), so that the
    # executed notebook records no machine path
    params = {"profile": profile, "report_dir": ".", "overrides": dict(parameters or {})}
    t0 = time.perf_counter()
    executed = staging / f"{name}.ipynb"
    # the kernel starts in the staging folder (nbclient's ``resources`` path); papermill's own ``cwd`` would change
    # this whole process's directory, which batch members running side by side in threads share
    try:
        pm.execute_notebook(str(nb.resolve()), str(executed.resolve()), parameters=params, kernel_name=kernel,
                            resources={"metadata": {"path": str(staging.resolve())}},
                            progress_bar={"desc": f"[tokenprune] {name}", "file": sys.stdout, "ascii": True,
                                          "mininterval": 5.0, "unit": "cell"},
                            request_save_on_cell_execute=False)
        if not (staging / "results.json").exists():
            raise RuntimeError(f"the notebook did not write {staging / 'results.json'}")
        publish(executed, staging, reports_dir, nb)
        body, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
        (staging / f"{name}.html").write_text(body, encoding="utf-8")
    except Exception as err:  # noqa: BLE001 - report any failure, keep the previous report
        msg = _failure_message(name, err)
        failed = reports_dir / f".failed-{name}.ipynb"
        if executed.exists():
            shutil.copyfile(executed, failed)
            msg += f" (executed copy: {failed})"
        shutil.rmtree(staging, ignore_errors=True)
        return NotebookRun(name, False, time.perf_counter() - t0, msg)
    old = reports_dir / f".old-{name}"
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    (reports_dir / f".failed-{name}.ipynb").unlink(missing_ok=True)
    return NotebookRun(name, True, time.perf_counter() - t0)


def parse_parameters(pairs: Sequence[Sequence[str]]) -> dict:
    """``-p NAME VALUE`` pairs as ``{NAME: YAML value}``; InputError naming a value that is not YAML or a name
    given twice."""
    params: dict = {}
    for name, text in pairs:
        if name in params:
            raise InputError(f"-p {name}: given twice ({params[name]!r} and {text!r}); give each parameter once")
        try:
            params[name] = yaml.safe_load(text)
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or type(err).__name__
            raise InputError(f"-p {name}: {text!r} is not a YAML value ({problem})") from None
    return params


def output_folder(path: Path, option: str = "--reports") -> Path:
    """``path`` as an output folder: refused (InputError naming ``option``) when something other than a folder
    is there. Nothing is created."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{option}: {path} exists and is not a folder")
    return path


def _checked(args: argparse.Namespace) -> tuple[list[Path], dict, Path]:
    """The notebooks, the ``-p`` parameters (checked against each notebook's profile table) and the output
    folder of a pipeline run, every one checked before anything is written."""
    with input_checks():
        check_profile(args.profile)
        notebooks = discover(args.notebooks, args.only)
        if not notebooks:
            raise InputError(f"--notebooks: {args.notebooks} holds no notebook NN_name.ipynb")
        params = parse_parameters(args.parameter)
        for nb in notebooks:  # every name and value checked before any notebook starts
            check_overrides(nb.stem, args.profile, params)
    return notebooks, params, output_folder(args.reports or reports_dir_for(args.profile))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokenprune pipeline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="default", help="smoke | default | paper")
    ap.add_argument("--only", nargs="*", help="notebook stems or numbers (default: all)")
    ap.add_argument("--notebooks", type=Path, default=REPO_ROOT / "notebooks")
    ap.add_argument("--reports", type=Path, default=None,
                    help="output folder (default: reports/ at the default profile, runs/<profile>/ at any other, "
                         "so that only a default run replaces the committed reports)")
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="change one setting of the profile (YAML value); unknown names are refused before any run")
    ap.add_argument("--kernel", default=KERNEL_NAME)
    args = ap.parse_args(argv)
    notebooks, params, reports = _checked(args)
    with folder_lock(reports, "--reports"):   # a second run into this folder is refused until this one ends
        return _run_all(args, notebooks, params, reports)


def _run_all(args: argparse.Namespace, notebooks: Sequence[Path], params: dict, reports: Path) -> int:
    """Run ``notebooks`` into ``reports`` (held by this run), then rebuild the ledger, the study page and, for the
    committed reports, the README's findings; returns the exit code (1 when a notebook failed)."""
    kernel = ensure_kernel(args.kernel)
    runs = []
    for nb in notebooks:
        print(f"[tokenprune] running {nb.name} (profile {args.profile}) ...", flush=True)
        run = run_notebook(nb, reports, args.profile, params, kernel)
        runs.append(run)
        status = "ok" if run.ok else "FAILED"
        print(f"[tokenprune] {nb.name}: {status} in {run.seconds:.0f} s{': ' + run.message if run.message else ''}",
              flush=True)
    ledger = write_ledger(reports)
    print(f"[tokenprune] ledger: {ledger}")
    print(f"[tokenprune] study page: {write_site(reports)}")
    if reports.resolve() == (REPO_ROOT / "reports").resolve():
        readme = REPO_ROOT / "README.md"
        text = readme.read_text(encoding="utf-8")
        if MARKERS[0] in text:
            atomic_write_text(readme, replace_between_markers(text, readme_findings(reports)))
            print(f"[tokenprune] README findings: {readme}")
    failed = [r for r in runs if not r.ok]
    if failed:
        print("[tokenprune] failed notebooks (previous reports kept):", file=sys.stderr)
        for r in failed:
            print(f"  {r.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
