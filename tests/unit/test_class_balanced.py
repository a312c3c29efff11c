"""data.class_balanced_indices: subsets of class-sorted releases cover every class."""
import numpy as np
import pytest

from tokenprune.data.datasets import class_balanced_indices


def test_a_subset_of_a_class_sorted_split_covers_every_class_evenly():
    labels = np.repeat(np.arange(200), 29)  # CUB's test split: about 29 images per class, class by class
    idx = class_balanced_indices(labels, 2048, seed=0)
    counts = np.bincount(labels[idx], minlength=200)
    assert len(idx) == 2048 and len(set(idx)) == 2048 and np.all(np.diff(idx) > 0)
    assert counts.min() >= 10 and counts.max() - counts.min() <= 1  # the first 2,048 rows would cover 71 classes
    assert np.array_equal(idx, class_balanced_indices(labels, 2048, seed=0))
    assert not np.array_equal(idx, class_balanced_indices(labels, 2048, seed=1))


def test_small_classes_give_all_their_rows_and_the_others_fill_in():
    labels = np.array([0] * 2 + [1] * 50 + [2] * 50)
    idx = class_balanced_indices(labels, 30, seed=3)
    counts = np.bincount(labels[idx], minlength=3)
    assert counts[0] == 2 and counts.sum() == 30 and abs(counts[1] - counts[2]) <= 1


def test_n_at_least_the_rows_gives_all_and_a_negative_n_is_refused():
    labels = np.array([1, 0, 1])
    assert list(class_balanced_indices(labels, 3, seed=0)) == [0, 1, 2]
    assert list(class_balanced_indices(labels, 10, seed=0)) == [0, 1, 2]
    with pytest.raises(ValueError, match="n"):
        class_balanced_indices(labels, -1, seed=0)


def test_a_subset_of_a_lazy_image_split_reads_labels_without_decoding_images(tmp_path):
    """The label column of an on-disk split (CUB fixture) is what decoupling.paper_setting balances over."""
    from test_data import _make_cub  # the CUB release-format fixture of the data tests

    from tokenprune.data import datasets as D

    _make_cub(tmp_path / "CUB_200_2011")
    test = D.load_cub200(tmp_path, val_fraction=0.0)["test"]
    labels = np.asarray(test["label"])
    assert labels.dtype.kind == "i" and len(labels) == len(test)
    idx = class_balanced_indices(labels, 2, seed=0)
    assert len(set(labels[idx])) == min(2, len(set(labels)))
