"""Bad input on the command line: ``python -m tokenprune COMMAND ...`` refuses it with one line on stderr that
names the parameter (or file), exits non-zero, and creates no file or folder. Every case is refused before a
notebook, a training run or a benchmark starts, so each test costs one interpreter start, or none where the command
line runs in this process (``tokenprune.__main__.main``, what ``python -m tokenprune`` calls). A pipeline run into a
folder another run is writing is refused the same way, and a run that was killed holds the folder no longer."""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from tokenprune.__main__ import main
from tokenprune.study import pipeline
from tokenprune.study.claims import ALL_VERDICTS, verdicts_of
from tokenprune.utils.environment import REPO_ROOT
from tokenprune.utils.io import LOCK_FILE, folder_lock

pytestmark = pytest.mark.timeout(300)

RECIPE = "evit_deit_s_finetune"   # a paper recipe with one run


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def _refused(args: list[str], cwd: Path, pythonpath: Path | None = None) -> str:
    """Run the command line in ``cwd``; assert it refused the input (exit code, one line on stderr, nothing new
    under ``cwd``) and return that line."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONWARNINGS": "ignore"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    before = _tree(cwd)
    proc = subprocess.run([sys.executable, "-m", "tokenprune", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert len(lines) == 1, proc.stderr
    assert _tree(cwd) == before, sorted(_tree(cwd) - before)
    return lines[0]


def _refused_here(args: list[str], capsys: pytest.CaptureFixture, root: Path) -> str:
    """Run the command line in this process; assert it refused the input (exit code 2, one line on stderr, nothing
    new or removed under ``root``) and return that line."""
    capsys.readouterr()
    before = _tree(root)
    code = main(args)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, (code, lines)
    assert _tree(root) == before, sorted(_tree(root) ^ before)
    return lines[0]


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory) -> Path:
    """The library and notebooks in a folder of their own, so that the default output folders (``runs/<profile>``
    under the repository) land there and their absence can be checked."""
    root = tmp_path_factory.mktemp("repo")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO_ROOT / "lib", root / "lib", ignore=ignore)
    shutil.copytree(REPO_ROOT / "notebooks", root / "notebooks", ignore=ignore)
    return root


@pytest.fixture()
def batch_file(tmp_path) -> Path:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"notebook": "01_evit", "profile": "smoke", "members": [{"batch": 2}]}))
    return spec


# ---------------------------------------------------------------------------------------------- pipeline
def test_pipeline_refuses_an_unknown_notebook(tmp_path):
    line = _refused(["pipeline", "--only", "nope", "--reports", str(tmp_path / "r")], tmp_path)
    assert "only" in line and "nope" in line


def test_pipeline_refuses_an_unknown_profile(tmp_path):
    line = _refused(["pipeline", "--profile", "nope", "--reports", str(tmp_path / "r")], tmp_path)
    assert "profile" in line and "nope" in line


def test_pipeline_refuses_a_bad_value_before_creating_the_default_folder(repo_copy):
    line = _refused(["pipeline", "--profile", "smoke", "--only", "01", "-p", "batch", "0"], repo_copy,
                    pythonpath=repo_copy / "lib")
    assert "batch" in line
    assert not (repo_copy / "runs").exists()


def test_pipeline_refuses_a_bad_value_before_creating_the_reports_folder(tmp_path):
    line = _refused(["pipeline", "--profile", "smoke", "--only", "01", "-p", "batch", "0",
                     "--reports", str(tmp_path / "r")], tmp_path)
    assert "batch" in line


def test_pipeline_refuses_an_unknown_parameter(tmp_path):
    line = _refused(["pipeline", "--only", "01", "-p", "no_such_setting", "1", "--reports", str(tmp_path / "r")],
                    tmp_path)
    assert "no_such_setting" in line


def test_pipeline_refuses_a_value_that_is_not_yaml(tmp_path):
    line = _refused(["pipeline", "--only", "01", "-p", "batch", "[2", "--reports", str(tmp_path / "r")], tmp_path)
    assert "batch" in line


def test_pipeline_refuses_a_reports_path_that_is_a_file(tmp_path):
    (tmp_path / "r").write_text("")
    line = _refused(["pipeline", "--only", "01", "--reports", str(tmp_path / "r")], tmp_path)
    assert "reports" in line and str(tmp_path / "r") in line


def test_pipeline_refuses_a_folder_without_notebooks(tmp_path):
    (tmp_path / "nb").mkdir()
    line = _refused(["pipeline", "--notebooks", str(tmp_path / "nb"), "--reports", str(tmp_path / "r")], tmp_path)
    assert "notebooks" in line and str(tmp_path / "nb") in line


@pytest.fixture()
def notebooks_stubbed(monkeypatch) -> list:
    """The pipeline with its notebook runs stubbed (each succeeds at once, writing nothing, after calling the hooks
    appended to the returned list) and no kernel installed: what is left is the command line around them."""
    hooks: list = []

    def run(nb: Path, reports_dir: Path, profile: str, parameters: Any = None, kernel: str = "",
            name: Any = None) -> pipeline.NotebookRun:
        for hook in hooks:
            hook()
        return pipeline.NotebookRun(nb.stem, True, 0.0)

    monkeypatch.setattr(pipeline, "run_notebook", run)
    monkeypatch.setattr(pipeline, "ensure_kernel", lambda name: name)
    return hooks


def _hold(folder: Path, held: Any) -> None:
    """A run's hold on ``folder``, in another process, until that process is killed."""
    with folder_lock(folder, "--reports"):
        held.set()
        time.sleep(300)


def test_a_second_pipeline_run_into_the_same_folder_is_refused_while_the_first_runs(tmp_path, capsys,
                                                                                    notebooks_stubbed):
    reports = tmp_path / "r"
    good = reports / "01_evit" / "results.json"
    good.parent.mkdir(parents=True)
    shutil.copyfile(REPO_ROOT / "reports" / "01_evit" / "results.json", good)
    args = ["pipeline", "--profile", "smoke", "--only", "01", "--reports", str(reports)]
    second: list[str] = []
    notebooks_stubbed.append(lambda: second.append(_refused_here(args, capsys, tmp_path)))
    assert main(args) == 0
    assert len(second) == 1 and "--reports" in second[0]
    assert good.read_bytes() == (REPO_ROOT / "reports" / "01_evit" / "results.json").read_bytes()
    with folder_lock(reports, "--reports"):   # released when the first run ended
        pass


def test_a_killed_pipeline_run_leaves_no_lock_behind(tmp_path, capsys, notebooks_stubbed):
    reports = tmp_path / "r"
    args = ["pipeline", "--profile", "smoke", "--only", "01", "--reports", str(reports)]
    fork = multiprocessing.get_context("fork")
    held = fork.Event()
    holder = fork.Process(target=_hold, args=(reports, held), daemon=True)
    holder.start()
    try:
        assert held.wait(60)
        assert "--reports" in _refused_here(args, capsys, tmp_path)
    finally:
        holder.kill()
        holder.join()
    assert (reports / LOCK_FILE).exists()   # the file stays behind, and blocks nothing
    assert main(args) == 0


# ---------------------------------------------------------------------------------------------- batch
def test_batch_refuses_a_shard_past_the_count(tmp_path, batch_file):
    line = _refused(["batch", str(batch_file), "--shard", "3/2", "--out", str(tmp_path / "out")], tmp_path)
    assert "shard" in line and "3/2" in line


def test_batch_refuses_no_jobs(tmp_path, batch_file):
    line = _refused(["batch", str(batch_file), "--jobs", "0", "--out", str(tmp_path / "out")], tmp_path)
    assert "jobs" in line


def test_batch_refuses_a_missing_batch_file(tmp_path):
    line = _refused(["batch", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "out")], tmp_path)
    assert "missing.yaml" in line


def test_batch_refuses_a_member_that_is_not_a_mapping(tmp_path):
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"notebook": "01_evit", "profile": "smoke", "members": [3]}))
    line = _refused(["batch", str(spec), "--out", str(tmp_path / "out")], tmp_path)
    assert "members" in line


# ---------------------------------------------------------------------------------------------- models
def test_models_refuses_an_unknown_model(tmp_path):
    line = _refused(["models", "--only", "nope", "--cache-dir", str(tmp_path / "ck")], tmp_path)
    assert "only" in line and "nope" in line


def test_models_refuses_an_unknown_profile_on_one_line(tmp_path):
    line = _refused(["models", "--profile", "nope", "--cache-dir", str(tmp_path / "ck")], tmp_path)
    assert "profile" in line and "nope" in line


def test_models_refuses_the_paper_profile_without_its_weights(tmp_path):
    line = _refused(["models", "--profile", "paper", "--cache-dir", str(tmp_path / "ck")], tmp_path)
    assert "--init" in line


# ---------------------------------------------------------------------------------------------- report
def test_report_refuses_a_folder_that_does_not_exist(tmp_path):
    line = _refused(["report", str(tmp_path / "reprots")], tmp_path)
    assert "reprots" in line


def test_report_refuses_a_folder_without_results(tmp_path):
    (tmp_path / "empty").mkdir()
    line = _refused(["report", str(tmp_path / "empty")], tmp_path)
    assert "empty" in line and "results.json" in line


def test_report_refuses_a_missing_ledger_to_check_against(tmp_path):
    line = _refused(["report", str(REPO_ROOT / "reports"), "--no-write", "--check-against",
                     str(tmp_path / "old.md")], tmp_path)
    assert "old.md" in line


@pytest.mark.parametrize("damage", ["a verdict of another kind", "no verdict", "truncated"])
def test_report_refuses_a_broken_results_file_naming_the_file_and_the_claim(tmp_path, capsys, damage):
    results = tmp_path / "reports" / "01_evit" / "results.json"
    results.parent.mkdir(parents=True)
    text = (REPO_ROOT / "reports" / "01_evit" / "results.json").read_text(encoding="utf-8")
    data = json.loads(text)
    claim = data["claims"][0]
    if damage == "no verdict":
        del claim["verdict"]
    else:
        claim["verdict"] = next(v for v in ALL_VERDICTS if v not in verdicts_of(claim["kind"]))
    results.write_text(text[: len(text) // 2] if damage == "truncated" else json.dumps(data), encoding="utf-8")
    line = _refused_here(["report", str(tmp_path / "reports")], capsys, tmp_path)
    assert str(results) in line
    if damage != "truncated":
        assert claim["id"] in line and "verdict" in line


# ---------------------------------------------------------------------------------------------- paper-train
def test_paper_train_refuses_zero_epochs(tmp_path):
    line = _refused(["paper-train", "--recipe", RECIPE, "--epochs", "0", "--out", str(tmp_path / "out")], tmp_path)
    assert "--epochs" in line


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cuda:7"])
def test_models_and_paper_train_refuse_a_device_on_one_line(tmp_path, device):
    """An unknown device, and a GPU this machine does not have (cuda:7), before anything is built or written."""
    for argv in (["models", "--device", device, "--cache-dir", str(tmp_path / "ck")],
                 ["paper-train", "--recipe", RECIPE, "--device", device, "--out", str(tmp_path / "out")]):
        line = _refused(argv, tmp_path)
        assert "--device" in line and device in line
    assert not (tmp_path / "ck").exists() and not (tmp_path / "out").exists()


def test_paper_train_refuses_a_missing_data_root(tmp_path):
    line = _refused(["paper-train", "--recipe", RECIPE, "--data-root", str(tmp_path / "imagenet"),
                     "--out", str(tmp_path / "out")], tmp_path)
    assert "--data-root" in line and "imagenet" in line


# ---------------------------------------------------------------------------------------------- the others
def test_bench_refuses_a_keep_rate_on_one_line(tmp_path):
    line = _refused(["bench", "--keep", "1.5"], tmp_path)
    assert "--keep" in line and "1.5" in line


def test_train_bench_refuses_an_unknown_setting(tmp_path):
    line = _refused(["train", "--bench", "--settings", "fp32", "nope"], tmp_path)
    assert "settings" in line and "nope" in line


def test_train_bench_refuses_an_empty_batch(tmp_path):
    line = _refused(["train", "--bench", "--batch", "0"], tmp_path)
    assert "--batch" in line


def test_prepare_refuses_an_unknown_step_on_one_line(tmp_path):
    line = _refused(["prepare", "nope"], tmp_path)
    assert "steps" in line and "nope" in line


@pytest.mark.parametrize("option,value", [("--scorer", "nope"), ("--reducer", "nope"), ("--model", "nope")])
def test_bench_refuses_an_unknown_method_or_model_on_one_line(tmp_path, option, value):
    line = _refused(["bench", option, value, "--batch", "1"], tmp_path)
    assert option.lstrip("-") in line and value in line


def test_bench_refuses_an_unknown_device_naming_the_accepted_ones(tmp_path, capsys):
    line = _refused_here(["bench", "--device", "gpu", "--json", str(tmp_path / "rows.json")], capsys, tmp_path)
    assert "--device" in line and "gpu" in line and "cpu" in line


def test_bench_refuses_cuda_where_torch_finds_none(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    line = _refused_here(["bench", "--device", "cuda", "--json", str(tmp_path / "rows.json")], capsys, tmp_path)
    assert "--device" in line and "cuda" in line
