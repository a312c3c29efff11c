"""The fine-tunes that would decide notebooks 01 and 03's fine-tuned claims on a model with none cached: the runs, what
they train, the estimate of their training time from the sizing speeds, and the premise that files the claims."""
import pytest

from tokenprune.study import verdicts
from tokenprune.study.proxy import needed_finetunes as N
from tokenprune.study.proxy.audit_model import MOVED
from tokenprune.study.why import MAX_WHY
from tokenprune.training.finetune import finetune_trainable
from tokenprune.training.proxy import finetunes as proxy_finetunes, round3

_CONDITIONS = [("unpruned", False), ("fuse70", True), ("fuse70_warm", True), ("drop70", True)]


def test_trained_words_name_the_blocks_one_based():
    assert N.trained_words(proxy_finetunes.trainable()) == "blocks 4-12, norm, fc_norm, head"
    assert N.trained_words(finetune_trainable("vit_s14_fmnist_ft")) == "block 12, norm, fc_norm, head"
    assert N.trained_words(["blocks.0.", "blocks.2.", "head."]) == "block 1, block 3, head"
    assert N.trained_words(None) == "every weight"


def test_a_round3_candidate_needs_k5s_trainable_and_is_sized_by_its_round():
    c = round3.CANDIDATES[0]
    n = N.needed(c.name, _CONDITIONS, range(5), 16384, "p_ft_<condition>_s<seed>")
    speeds = round3.SIZED_FROM
    fast, slow = speeds["pruned_train_img_per_s"][c.img_size], speeds["train_img_per_s"][c.img_size]
    assert n.runs == 20 and n.trainable == tuple(proxy_finetunes.trainable())
    assert n.hours == pytest.approx(5 * 16384 * (1 / slow + 3 / fast) / 3600)
    assert N.needed(f"{c.name}_smoke", _CONDITIONS, range(5), 16384, "p").hours == pytest.approx(n.hours)
    assert n.record()["estimated training hours on this CPU"] == round(n.hours, 2)
    assert n.record()["seeds"] == [0, 1, 2, 3, 4] and n.record()["training images each"] == 16384


def test_a_model_of_no_sized_round_has_no_estimate():
    n = N.needed("small_vit_fmnist", _CONDITIONS, range(3), 8192, "p")
    assert n.hours is None and n.trainable is None and N.sizing_speeds("small_vit_fmnist") is None
    assert n.record()["estimated training hours on this CPU"] is None


def test_the_premise_fails_as_not_testable_and_its_failure_fits_a_why():
    for conditions, seeds in ((_CONDITIONS, range(5)), (_CONDITIONS + [("a", True), ("b", True)], range(5))):
        p = N.needed(round3.CANDIDATES[0].name, conditions, seeds, 16384, "p").premise()
        assert (p.name, p.holds, p.fails_as) == (MOVED, False, verdicts.NOT_TESTABLE)
        why = p.gate(verdicts.Decision("reproduced", "", "r")).why
        assert str(len(conditions) * 5) in p.detail and len(why) <= MAX_WHY
