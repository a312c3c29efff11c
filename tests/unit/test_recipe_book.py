"""The papers' recipes as data (training/recipes/*.yaml) and ImageNet-100's class list."""
import pytest

from tokenprune.data import datasets as D
from tokenprune.training import model_recipes
from tokenprune.training import recipe_book as RB


@pytest.mark.parametrize("name", RB.recipe_names())
def test_every_recipe_loads_and_every_value_says_where_it_comes_from(name):
    r = RB.load_recipe(name)
    assert r.values and set(r.values) == set(r.sources) and set(r.values) <= set(RB.FIELDS)
    assert all(s.strip() for s in r.sources.values())


def test_evit_shrinks_from_the_first_epoch_when_fine_tuning_and_from_epoch_10_from_scratch():
    ft, scratch = RB.load_recipe("evit_deit_s_finetune"), RB.load_recipe("evit_deit_s_scratch")
    assert (ft["shrink_start_epoch"], ft["shrink_epochs"], ft["epochs"]) == (0, 0, 30)
    assert (scratch["shrink_start_epoch"], scratch["shrink_epochs"], scratch["epochs"]) == (10, 100, 300)
    assert ft.lr == pytest.approx(8e-5) and scratch.lr == pytest.approx(2e-3)
    assert "youweiliang/evit#3" in ft.sources["shrink_start_epoch"]  # the source cited
    # inherited: DeiT's augmentations, with their sources
    assert ft["mixup"] == 0.8 and ft["repeated_aug"] is True and "main.py" in ft.sources["mixup"]


def test_bat_fine_tunes_30_epochs_and_trains_its_keep_07_row_from_scratch():
    ft, scratch = RB.load_recipe("bat_deit_s_finetune"), RB.load_recipe("bat_deit_s_scratch")
    assert ft["epochs"] == 30 and ft.lr == pytest.approx(4e-5) and 0.7 not in ft["keep_rate"]
    assert scratch["epochs"] == 300 and scratch["keep_rate"] == 0.7 and scratch["init"] is None


def test_the_paper_profiles_evit_finetune_takes_its_numbers_from_the_recipe_file():
    (rec,) = model_recipes.paper_recipes(None).values()
    book = RB.load_recipe("evit_deit_s_finetune")
    assert (rec.epochs, rec.batch_size, rec.lr, rec.min_lr, rec.weight_decay) == (
        book["epochs"], book["global_batch"], book.lr, book["min_lr"], book["weight_decay"])
    assert (rec.keep_start, rec.keep_length) == (0, 0)


def test_a_bad_recipe_file_is_refused_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.setattr(RB, "RECIPE_DIR", tmp_path)
    (tmp_path / "x.yaml").write_text("name: x\npaper: p\nwhat: w\nvalues:\n  epoch: {value: 3, source: s}\n")
    with pytest.raises(ValueError, match="'epoch'"):
        RB.load_recipe("x")
    (tmp_path / "y.yaml").write_text("name: y\npaper: p\nwhat: w\nvalues:\n  epochs: {value: 3, source: ''}\n")
    with pytest.raises(ValueError, match="source"):
        RB.load_recipe("y")
    (tmp_path / "z.yaml").write_text("name: z\npaper: p\nwhat: w\ninherits: z\nvalues: {}\n")
    with pytest.raises(ValueError, match="'z'"):
        RB.load_recipe("z")
    with pytest.raises(ValueError, match="'nope'"):
        RB.load_recipe("nope")
    with pytest.raises(KeyError, match="'lr_x'"):
        RB.PaperRecipe("a", "p", "w")["lr_x"]


def test_imagenet100_is_cmcs_100_classes_linked_from_an_imagenet_folder(tmp_path):
    ids = D.imagenet100_classes()
    assert len(ids) == 100 and ids[0] == "n02869837" and all(i.startswith("n") and len(i) == 9 for i in ids)
    src = tmp_path / "imagenet"
    for split in ("train", "val"):
        for c in ids + ["n99999999"]:  # one class that is not in ImageNet-100
            (src / split / c).mkdir(parents=True)
    out = D.make_imagenet100(src, tmp_path / "imagenet100")
    assert sorted(p.name for p in (out / "train").iterdir()) == sorted(ids)
    assert all((out / "val" / c).is_symlink() for c in ids)
    assert D.make_imagenet100(src, out) == out  # a second run keeps the links
    (src / "val" / ids[5]).rmdir()
    with pytest.raises(D.DatasetNotFoundError, match=ids[5]):
        D.make_imagenet100(src, tmp_path / "other")
