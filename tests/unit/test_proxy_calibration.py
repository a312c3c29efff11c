"""The pre-registered calibration measured from cached outputs: the costs are the paired differences the plan
names, K5 is the fine-tunes' gain over seeds and images, and the choice follows the plan on what was measured."""
import numpy as np
import pytest

from tokenprune.study.proxy import calibration as pcal
from tokenprune.study.proxy import plan
from tokenprune.training.proxy import finetunes as proxy_finetunes, outputs as proxy_outputs
from tokenprune.training.proxy.candidates import FINETUNE

N = 2000


def _logits(correct: np.ndarray, labels: np.ndarray) -> np.ndarray:
    out = np.zeros((len(labels), 10), np.float32)
    out[np.arange(len(labels)), np.where(correct, labels, (labels + 1) % 10)] = 1.0
    return out


def _arrays(wrong: dict[str, int], base_wrong: int = 100) -> dict[str, np.ndarray]:
    """Outputs where the unpruned model misses ``base_wrong`` images and each configuration misses ``wrong[k]``
    more (the first ones after those)."""
    labels = np.arange(N) % 10
    out = {"labels": labels, "object_token_share": np.full(N, 0.3, np.float32)}
    for k in proxy_outputs._labels(plan.CANDIDATES[0]):
        miss = base_wrong + wrong.get(k, 0)
        out[f"logits/{k}"] = _logits(np.arange(N) >= miss, labels)
    return out


GOOD = {"fuse@0.9": 10, "fuse@0.7": 40, "fuse@0.5": 120, "random@0.5": 300, "mink@0.5": 600,
        f"tome@r{proxy_outputs.TOME_R}": 30}


def test_costs_are_paired_differences_in_points():
    m = pcal.measurements(plan.CANDIDATES[0], _arrays(GOOD))
    assert m["top1"] == pytest.approx(95.0)
    assert m["cost@0.7"] == pytest.approx(2.0) and m["cost@0.7_low"] > 0
    assert m["cost@0.5"] == pytest.approx(6.0) and m["tome_cost"] == pytest.approx(1.5)
    assert m["topk-random@0.5"] == pytest.approx(9.0) and m["random-mink@0.5"] == pytest.approx(15.0)
    assert m["object_token_share"] == pytest.approx(0.3)


def test_the_cached_tome_r_is_the_plans():
    assert pcal.nearest_tome_r(plan.CANDIDATES[0]) == proxy_outputs.TOME_R


def _with_finetunes(monkeypatch, names, ft_wrong):
    monkeypatch.setattr(proxy_finetunes, "FINETUNED", tuple(names))
    labels = np.arange(N) % 10

    def load(c, s, profile="default"):
        return {"labels": labels, "logits": _logits(np.arange(N) >= 100 + ft_wrong[s], labels)}, {}

    monkeypatch.setattr(proxy_finetunes, "load", load)


def test_k5_is_the_gain_over_seeds_and_images(monkeypatch):
    c = plan.CANDIDATES[0]
    assert pcal.k5(c, _arrays(GOOD), 2.0) is None                      # no fine-tunes: not measured
    _with_finetunes(monkeypatch, [c.name], {s: 10 for s in FINETUNE["seeds"]})
    r = pcal.k5(c, _arrays(GOOD), 2.0)
    assert r["ft_gain@0.7"] == pytest.approx(1.5) and r["ft_share_of_cost"] == pytest.approx(75.0)
    assert r["ft_gain@0.7_low"] > 0 and r["ft_seeds"] == len(FINETUNE["seeds"])


def test_calibrate_chooses_by_the_plan(monkeypatch):
    costly = {**GOOD, "fuse@0.7": 200}                                 # 10 points at keep 0.7: above K2's band
    first, second = [c.name for c in plan.CANDIDATES if c.role == "classification"][:2]
    monkeypatch.setattr(proxy_outputs, "load",
                        lambda c, profile="default": (_arrays(costly if c.name == first else GOOD), {}))
    rows, chosen = pcal.calibrate()
    assert chosen["classification"] == (None, "none")                  # K5 unmeasured: nothing is chosen
    _with_finetunes(monkeypatch, [first, second], {s: 10 for s in FINETUNE["seeds"]})
    rows, chosen = pcal.calibrate()
    assert chosen["classification"] == (second, "meets every criterion")
    t = pcal.table(rows)
    assert t.set_index("candidate").loc[first, "K2"] == "missed" and t.set_index("candidate").loc[second, "K2"] == "met"


def test_the_table_shows_every_criterion_for_every_candidate_and_the_plan_as_declared(monkeypatch):
    monkeypatch.setattr(proxy_outputs, "load", lambda c, profile="default": (_arrays(GOOD), {}))
    rows, chosen = pcal.calibrate()
    t = pcal.table(rows, chosen).set_index("candidate")
    assert list(t.index) == [c.name for c in plan.CANDIDATES]
    fine = [c.name for c in plan.CANDIDATES if c.role == "fine-grained"]
    assert (t.loc[fine, "K4"] == pcal.NOT_A_CRITERION).all() and (t.loc[fine, "K5"] == pcal.NOT_A_CRITERION).all()
    assert set(t["K1"]) <= {"met", "missed"} and (t["band_distance"] >= 0).all()
    assert (t["chosen"] != "").sum() == sum(name is not None for name, _ in chosen.values())
    crit = pcal.criteria_table()
    assert list(crit["id"]) == [c.id for c in plan.CRITERIA] and crit["anchor"].str.len().min() > 0
    assert crit.set_index("id").loc["K2", "band"] == "[0.3, 4]" and crit.set_index("id").loc["K1", "band"] == "(-inf, 0.5]"
    cands = pcal.candidates_table()
    assert list(cands["name"]) == [c.name for c in plan.CANDIDATES] and list(cands["order"]) == list(
        range(1, len(plan.CANDIDATES) + 1))


def _git_log(*args: str, root=None) -> list[str]:
    import subprocess

    cmd = ["git"] + (["-C", str(root)] if root is not None else []) + ["log", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()


def test_the_preregistration_is_the_commit_that_added_the_plan():
    """Notebook 00's pre-registration is the commit that first added the plan, at whatever path the plan had then,
    and every later commit that touched any of the plan's files at any of their paths is listed after it."""
    from tokenprune.study.proxy import chosen

    pre = chosen.preregistration()
    if pre["commit"] is None:
        pytest.skip("no git history here")
    plan_paths = chosen.PLAN_FILES[0]
    added = _git_log("--diff-filter=A", "--format=%H", "--", *plan_paths)
    assert pre["commit"] == added[-1]
    assert all(c["commit"] != pre["commit"] for c in pre["changed_since"])
    listed = {c["commit"] for c in pre["changed_since"]}
    for file in chosen.PLAN_FILES:
        for path in file:
            assert set(_git_log("--format=%H", f"{pre['commit']}..HEAD", "--", path)) <= listed, path


def test_every_plan_file_is_where_the_history_looks_for_it():
    """Each of the plan's files is at the first of its paths today, so a move that forgets to name the new path fails
    here instead of dropping the file's later commits from notebook 00's report."""
    from tokenprune.study.proxy import chosen
    from tokenprune.utils.environment import REPO_ROOT

    assert chosen.PLAN_FILES[0][0].endswith("study/proxy/plan.py")
    for file in chosen.PLAN_FILES:
        assert (REPO_ROOT / file[0]).is_file(), file[0]
        assert not any((REPO_ROOT / old).exists() for old in file[1:]), file


def test_the_preregistration_survives_a_move_of_the_plan(tmp_path, monkeypatch):
    """In a repository where the plan was added, changed, then moved to its path of today: the pre-registration is
    still the commit that added it, and the change and the move are both listed after it."""
    import subprocess

    from tokenprune.study.proxy import chosen

    for k, v in {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
                 "GIT_COMMITTER_EMAIL": "a@b", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}.items():
        monkeypatch.setenv(k, v)
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], capture_output=True, text=True, check=True)
    git("init", "-q")
    new, old = chosen.PLAN_FILES[0][0], chosen.PLAN_FILES[0][-1]
    (tmp_path / old).parent.mkdir(parents=True)
    (tmp_path / old).write_text("CRITERIA = ()\n" * 20)
    git("add", "-A")
    git("commit", "-q", "-m", "the plan")
    (tmp_path / old).write_text("CRITERIA = ()\n" * 20 + "BARS = {}\n")
    git("commit", "-q", "-am", "a change")
    (tmp_path / new).parent.mkdir(parents=True, exist_ok=True)
    git("mv", old, new)
    (tmp_path / new).write_text("CRITERIA = ()\n" * 20 + "BARS = {}\n# moved\n")
    git("commit", "-q", "-am", "the move")
    pre = chosen.preregistration(tmp_path)
    assert pre["subject"] == "the plan"
    assert [c["subject"] for c in pre["changed_since"]] == ["the move", "a change"]
