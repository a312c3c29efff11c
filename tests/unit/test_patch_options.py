"""Options are checked when ``patch()`` is called, not at the first forward pass (which never reaches the
reducer at keep 1.0)."""
import pytest
import timm

import tokenprune


def _tiny():
    return timm.create_model("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=4, num_classes=3)


@pytest.mark.parametrize("reducer,options,match", [
    ("fuse_softmax", {"temperature": -1}, "temperature: must be a number > 0"),
    ("fuse_softmax", {"temperature": "hot"}, "temperature: must be a number > 0"),
    ("merge_dpcknn", {"num_clusters": 0}, "num_clusters: expected an int >= 1"),
    ("merge_dpcknn", {"k": 0}, "k: expected an int >= 1"),
    ("merge_dpcknn", {"pair_fraction": 1.5}, r"pair_fraction: expected a number in \[0, 1\)"),
    ("merge_dpcknn_budget", {"merge_weight": "mean"}, "merge_weight: unknown 'mean'; accepted"),
    ("cluster_all", {"k": -2}, "k: expected an int >= 1"),
])
def test_bad_reducer_options_fail_at_patch_time(reducer, options, match):
    with pytest.raises(ValueError, match=match):
        tokenprune.patch(_tiny(), keep_rate=1.0, locations=(2,), reducer=reducer, reducer_options=options)


def test_good_options_still_patch():
    m = tokenprune.patch(_tiny(), keep_rate=0.5, locations=(2,), reducer="fuse_softmax",
                         reducer_options={"temperature": 0.5})
    assert tokenprune.prune_state(m).reducer.name == "fuse_softmax"


@pytest.mark.parametrize("seed", ["x", 1.5, True])
def test_seed_must_be_an_int(seed):
    with pytest.raises(ValueError, match="seed"):
        tokenprune.patch(_tiny(), keep_rate=0.5, scorer="random", seed=seed)


def test_empty_locations_are_refused():
    with pytest.raises(ValueError, match="locations"):
        tokenprune.patch(_tiny(), keep_rate=0.5, locations=())
