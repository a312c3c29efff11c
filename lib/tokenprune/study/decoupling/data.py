"""The settings of notebook 04: a dataset with a model, its training and evaluation images, and the evaluation
images' part and object patch sets on the model's own patch grid (:class:`Setting`, :func:`load_settings`); one
unpruned pass per image set (:func:`cache_settings`). SynthBirds and cluttered Fashion-MNIST run below the paper
profile; CUB, Stanford Cars and FGVC-Aircraft with DeiT-S / DeiT-B (the user's checkpoints or the runs of the recipe
:data:`PAPER_RECIPE`) at it."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import numpy as np
import pandas as pd
import timm
import torch
import torch.nn.functional as F

from tokenprune.core import split_forward as split
from tokenprune.data import datasets as data
from tokenprune.data import pretrained, synthetic
from tokenprune.measure import coverage, intervals, metrics
from tokenprune.study import paper_runs
from tokenprune.study.proxy import chosen
from tokenprune.training import base_models, model_recipes
from tokenprune.training.sources import Preprocess

__all__ = ["PAPER_DATASET", "PAPER_DIRS", "PAPER_ARCH", "PAPER_RECIPE", "FMNIST_CLUTTER", "FMNIST_MODELS", "Setting",
           "base_model", "part_model_name", "fmnist_model_name", "annotate_parts", "fit_linear_head", "parts_setting",
           "fmnist_setting", "paper_run_spec", "given_checkpoint", "check_paper_inputs", "paper_model", "paper_setting",
           "make_setting", "load_settings", "Caches", "OnDemand", "cache_settings", "settings_table"]

PAPER_DATASET = {
    "parts": "SynthBirds (procedural parts, exact keypoints)",
    "fmnist": "cluttered Fashion-MNIST (object masks)",
    "cub": "CUB-200-2011 (part keypoints)",
    "cars": "Stanford Cars (boxes)",
    "aircraft": "FGVC-Aircraft (boxes)",
}


@dataclass
class Setting:
    """A dataset with a model: training and evaluation images, and the evaluation images' part and object
    patch sets on the model's own patch grid."""

    name: str
    dataset: str
    model_label: str
    model: torch.nn.Module
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_eval: torch.Tensor
    y_eval: torch.Tensor
    raw_eval: np.ndarray                 # uint8 images for figures
    parts: Optional[torch.Tensor]        # [B, K, N] bool patch sets of the parts (None: no parts)
    obj: torch.Tensor                    # [B, N] bool object patches
    grid: tuple
    blocks: list
    keypoints: Optional[np.ndarray] = None   # [B, K, 3] in raw-image pixels, for figures
    obj_mask: Optional[np.ndarray] = None    # [B, H, W] for figures
    info: dict = field(default_factory=dict)
    n_test_split: int = 0                    # images of the full test split the evaluation images come from
    run: Optional[paper_runs.TrainedRun] = None  # paper datasets: where the model comes from (its weights: ``model``)

    @property
    def patch_tokens(self) -> int:
        return self.grid[0] * self.grid[1]


def base_model(name: str, smoke: bool):
    """The project's base model ``name`` (its ``_smoke`` version, trained if missing, at the smoke profile)."""
    model, info = base_models.load_base_model(f"{name}_smoke" if smoke else name, train_if_missing=smoke,
                                              progress=False)
    return model.eval(), info


def annotate_parts(kp: np.ndarray, part_mask: np.ndarray, size: int, grid: tuple, part_source: str):
    """Part patch sets (from keypoints or from the part masks) and object patches on ``grid``."""
    ps = size // grid[0]
    if part_source == "keypoints":
        sets = coverage.keypoints_to_patch_index(kp[..., :2], kp[..., 2] > 0, img_size=size, patch_size=ps)
    else:
        sets = coverage.mask_to_patch_grid(part_mask, patch_size=ps, num_parts=synthetic.N_PARTS)
    obj = coverage.mask_to_patch_grid(part_mask > 0, patch_size=ps)
    return sets, obj


def fit_linear_head(model, feats: torch.Tensor, labels: torch.Tensor, num_classes: int, seed: int,
                    iters: int = 300) -> float:
    """Logistic regression on frozen features (full batch AdamW, weight decay 1e-4), written into model.head;
    returns the last training loss."""
    head = torch.nn.Linear(feats.shape[1], num_classes)
    torch.manual_seed(seed)
    torch.nn.init.zeros_(head.weight), torch.nn.init.zeros_(head.bias)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-2, weight_decay=1e-4)
    mu, sd = feats.mean(0), feats.std(0).clamp_min(1e-6)
    z = (feats - mu) / sd
    for _ in range(iters):
        loss = F.cross_entropy(head(z), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    lin = torch.nn.Linear(feats.shape[1], num_classes)
    with torch.no_grad():  # fold the standardisation into the layer
        lin.weight.copy_(head.weight / sd)
        lin.bias.copy_(head.bias - (head.weight * (mu / sd)).sum(1))
    model.head = lin
    return float(loss.detach())


def _recipe(cfg: SimpleNamespace, name: str):
    smoke = cfg.profile == "smoke"
    return model_recipes.find_recipe(name + ("_smoke" if smoke else ""), "smoke" if smoke else "default")[1]


def _sizes(cfg: SimpleNamespace, size_name: str) -> tuple[int, int]:
    return (cfg.n_train, cfg.n_eval) if size_name == "small" else (cfg.n_train_large, cfg.n_eval_large)


def parts_setting(size_name: str, cfg: SimpleNamespace) -> Setting:
    """SynthBirds with the fine-grained proxy of notebook 00 (``small``: :data:`tokenprune.study.proxy.chosen.
    FINE_GRAINED`, trained on it), or ViT-S/14 (frozen) with a linear probe fitted later (``large``)."""
    nt, ne = _sizes(cfg, size_name)
    # the images the proxy was trained and tested on: its recipe's generator settings
    recipe = _recipe(cfg, chosen.FINE_GRAINED)
    gen = {k: v for k, v in recipe.dataset_kwargs.items() if k not in ("n_train", "n_val", "n_test")}
    size = int(gen.get("img_size", recipe.img_size))
    if size_name == "small":
        model, info = base_model(chosen.FINE_GRAINED, cfg.profile == "smoke")
        pre = model.tp_preprocess
        label = (f"the fine-grained proxy ({info['name']}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M "
                 "params)")
    else:
        model = pretrained.load_vit_s14(img_size=cfg.parts_large_img_size, num_classes=len(synthetic.CLASS_NAMES))
        pre = Preprocess(cfg.parts_large_img_size, channels=3, mean=pretrained.VIT_S14_MEAN, std=pretrained.VIT_S14_STD,
                         resize="bilinear")
        info = {"name": f"vit_s14@{cfg.parts_large_img_size}+linear probe (fitted here)"}
        label = (f"ViT-S/14 at {cfg.parts_large_img_size} px + linear probe "
                 f"({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M params)")
    ds = synthetic.part_dataset(nt, 0, ne, **gen)
    grid = tuple(int(g) for g in model.patch_embed.grid_size)
    tr, te = ds["train"], ds["test"]
    to_x = lambda imgs: pre(torch.from_numpy(np.ascontiguousarray(imgs)).permute(0, 3, 1, 2))  # noqa: E731
    kp, pm = np.asarray(te["keypoints"]), np.asarray(te["part_mask"])
    sets, obj = annotate_parts(kp, pm, size, grid, cfg.part_source)
    raw = np.asarray(te["image"])
    return Setting(f"parts/{size_name}", "parts", label, model, to_x(np.asarray(tr["image"])),
                   torch.as_tensor(np.asarray(tr["label"])).long(), to_x(raw),
                   torch.as_tensor(np.asarray(te["label"])).long(),
                   raw, sets, obj, grid, cfg.blocks if size_name == "small" else cfg.large_blocks, kp, pm > 0, info,
                   n_test_split=max(ne, int(recipe.dataset_kwargs.get("n_test", ne))))


FMNIST_CLUTTER = dict(canvas=28, n_clutter=6, piece_size=(5, 9), gap=1)
#: the models of the Fashion-MNIST settings, trained on plain Fashion-MNIST at 28 px
FMNIST_MODELS = {"small": "small_vit_fmnist", "large": "vit_s14_fmnist_linear"}


def fmnist_setting(size_name: str, cfg: SimpleNamespace) -> Setting:
    """Cluttered Fashion-MNIST (made at the models' 28 px) with the small ViT or ViT-S/14 + linear head."""
    nt, ne = _sizes(cfg, size_name)
    model, info = base_model(FMNIST_MODELS[size_name], cfg.profile == "smoke")
    pre = model.tp_preprocess
    recipe = _recipe(cfg, "small_vit_fmnist")
    ds = data.load_fashion_mnist(**recipe.dataset_kwargs)  # the base models' split
    out = {}
    for split_name, n, s in (("train", nt, 1), ("test", ne, 2)):
        part = ds[split_name].select(range(n))
        out[split_name] = synthetic.clutter_items(data.to_numpy(part, "image"), data.to_numpy(part, "label"), seed=s,
                                                  **FMNIST_CLUTTER)
    grid = tuple(int(g) for g in model.patch_embed.grid_size)
    ps = FMNIST_CLUTTER["canvas"] // grid[0]
    if FMNIST_CLUTTER["canvas"] % grid[0]:
        raise ValueError(f"fmnist: a {grid} grid does not tile the {FMNIST_CLUTTER['canvas']} px canvas")
    obj_mask = out["test"]["object_mask"].astype(bool)
    obj = coverage.mask_to_patch_grid(obj_mask, patch_size=ps)
    to_x = lambda imgs: pre(torch.from_numpy(imgs)[:, None])  # noqa: E731
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    label = (f"small ViT ({info['name']}, {n_params:.1f} M params)" if size_name == "small"
             else f"ViT-S/14 + linear head ({info['name']}, {n_params:.1f} M params)")
    return Setting(f"fmnist/{size_name}", "fmnist", label, model, to_x(out["train"]["image"]),
                   torch.as_tensor(out["train"]["label"]).long(), to_x(out["test"]["image"]),
                   torch.as_tensor(out["test"]["label"]).long(), out["test"]["image"], None, obj, grid,
                   cfg.blocks if size_name == "small" else cfg.large_blocks, None, obj_mask, info,
                   n_test_split=max(ne, len(ds["test"])))


PAPER_DIRS = {"cub": "CUB_200_2011", "cars": "stanford_cars", "aircraft": "fgvc-aircraft-2013b"}


PAPER_ARCH = {"small": "deit_small_patch16_224", "large": "deit_base_patch16_224"}


PAPER_RECIPE = "decoupling_fgvc_finetune"


def paper_run_spec(name: str):
    """The run of the recipe :data:`PAPER_RECIPE` that gives the model of the paper setting ``name``
    (``<cub|cars|aircraft>/<small|large>``: DeiT-S / DeiT-B, :data:`PAPER_ARCH`)."""
    ds_name, size_name = name.split("/")
    return paper_runs.recipe_run(PAPER_RECIPE, model=PAPER_ARCH[size_name], dataset=ds_name)


def given_checkpoint(name: str, cfg: SimpleNamespace) -> Optional[Path]:
    """The user's checkpoint of the paper setting ``name``, ``checkpoint_dir/<dataset>_<size>.pth``, when
    ``checkpoint_dir`` is set and the file exists; else None (the recipe's run gives the model)."""
    if not cfg.checkpoint_dir:
        return None
    path = Path(cfg.checkpoint_dir).expanduser() / f"{name.replace('/', '_')}.pth"
    return path if path.is_file() else None


def check_paper_inputs(cfg: SimpleNamespace) -> None:
    """Before any paper setting loads (so a missing file stops the run at once, not after a model has trained):
    ``data_root`` is set, and every model neither ``checkpoint_dir`` gives nor a run of ``runs_dir`` has finished
    (its ``summary.json``) has its recipe's start checkpoint in ``init_dir``. FileNotFoundError naming the parameter
    and the files expected."""
    names = [n for n in cfg.settings if n.split("/")[0] in PAPER_DIRS]
    if not names:
        return
    if not cfg.data_root:
        raise FileNotFoundError("data_root: profile 'paper' needs the folder holding CUB_200_2011/, stanford_cars/ "
                                "and fgvc-aircraft-2013b/ (each in its release format); pass -p data_root ...")
    runs = paper_runs.runs_root(cfg)
    to_train = [n for n in names if given_checkpoint(n, cfg) is None
                and not (runs / paper_run_spec(n).name / "summary.json").is_file()]
    need = sorted({paper_run_spec(n).init for n in to_train})
    if not need:
        return
    missing = [f for f in need if not cfg.init_dir or not (Path(cfg.init_dir).expanduser() / f).is_file()]
    if missing:
        where = f"not found in {cfg.init_dir}" if cfg.init_dir else "init_dir is not set"
        raise FileNotFoundError(
            f"init_dir: {', '.join(to_train)} have no checkpoint in checkpoint_dir "
            f"({cfg.checkpoint_dir or 'not set'}: expected <dataset>_<small|large>.pth) and no finished run in {runs}, "
            "so they are trained by the "
            f"recipe {PAPER_RECIPE}, which starts from {', '.join(need)} (facebookresearch/deit's ImageNet weights, "
            f"{{'model': state_dict}}); {', '.join(missing)}: {where}. Pass -p init_dir <folder holding them>, or "
            "give the fine-tuned checkpoints in checkpoint_dir")


def paper_model(name: str, cfg: SimpleNamespace, data_root: Path):
    """``(timm model in eval mode, TrainedRun)`` of the paper setting ``name``: the user's checkpoint
    (:func:`given_checkpoint`), else the recipe's run through :func:`tokenprune.study.paper_runs.trained_model`
    (a finished run of ``runs_dir`` is loaded, a missing one trained under the notebook's limits). The weights
    are copied into a plain timm model (the run's model is patched at keep 1, which equals timm), so the rest of
    the notebook sees the same model as with a given checkpoint; the TrainedRun keeps no model."""
    spec = paper_run_spec(name)
    given = given_checkpoint(name, cfg)
    init = None if given else str(Path(cfg.init_dir).expanduser() / spec.init)
    tr = paper_runs.trained_model(spec, cfg, str(data_root), init, given=str(given) if given else None)
    num_classes = int(tr.model.get_classifier().out_features)
    model = timm.create_model(spec.model, pretrained=False, num_classes=num_classes)
    model.load_state_dict(tr.model.state_dict(), strict=True)
    return model.eval(), dataclasses.replace(tr, model=None)


def paper_setting(name: str, cfg: SimpleNamespace) -> Setting:
    """CUB (part keypoints + box), Cars and Aircraft (box) at 224 px (resized, no crop, so annotations scale),
    with DeiT-S ("small") / DeiT-B ("large": our stand-in for the source's "much larger, more powerful version")
    fine-tuned on the dataset: the user's checkpoint from checkpoint_dir, else the recipe's run
    (:func:`paper_model`)."""
    ds_name, size_name = name.split("/")
    check_paper_inputs(SimpleNamespace(**{**vars(cfg), "settings": [name]}))
    root = Path(cfg.data_root).expanduser() / PAPER_DIRS[ds_name]
    dsd = data.load_dataset(ds_name, root=root)
    model, run = paper_model(name, cfg, root)
    tag = Path(run.path).name if run.source == "given" else f"{run.spec.name}, {run.source}"
    size, grid = 224, tuple(model.patch_embed.grid_size)
    ps = size // grid[0]
    nt, ne = _sizes(cfg, size_name)
    mean = torch.tensor(timm.data.IMAGENET_DEFAULT_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(timm.data.IMAGENET_DEFAULT_STD).view(1, 3, 1, 1)

    def load(split_name, n):
        split = dsd[split_name]  # a class-balanced subset: CUB lists its test images class by class
        rows = split.select(data.class_balanced_indices(np.asarray(split["label"]), n, seed=cfg.seed))
        imgs, kps, boxes, labels = [], [], [], []
        for r in rows:
            im = np.asarray(r["image"])
            h, w = im.shape[:2]
            t = torch.from_numpy(im).permute(2, 0, 1)[None].float() / 255
            imgs.append(F.interpolate(t, size=(size, size), mode="bilinear", antialias=True, align_corners=False))
            sx, sy = size / w, size / h
            boxes.append(np.asarray(r["bbox"], dtype=np.float64) * [sx, sy, sx, sy])
            if "parts" in r:
                p = np.asarray(r["parts"], dtype=np.float64).copy()
                p[:, 0] *= sx
                p[:, 1] *= sy
                kps.append(p)
            labels.append(int(r["label"]))
        x = torch.cat(imgs)
        raw = (x.permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
        box_mask = np.zeros((len(boxes), size, size), dtype=bool)
        for i, (x0, y0, x1, y1) in enumerate(boxes):
            box_mask[i, int(y0):int(math.ceil(y1)), int(x0):int(math.ceil(x1))] = True
        return (x - mean) / std, torch.tensor(labels), raw, (np.stack(kps) if kps else None), box_mask

    x_tr, y_tr, _, _, _ = load("train", nt)
    x_ev, y_ev, raw, kp, box_mask = load("test", ne)
    sets = None
    if kp is not None:
        sets = coverage.keypoints_to_patch_index(kp[..., :2], kp[..., 2] > 0, img_size=size, patch_size=ps)
    obj = coverage.mask_to_patch_grid(box_mask, patch_size=ps)
    return Setting(name, ds_name, f"{PAPER_ARCH[size_name]} ({tag})", model, x_tr, y_tr, x_ev, y_ev, raw, sets,
                   obj, grid, cfg.blocks if size_name == "small" else cfg.large_blocks, kp, box_mask,
                   {"name": tag, "run": run.describe()}, n_test_split=max(len(x_ev), len(dsd["test"])), run=run)


def make_setting(name: str, cfg: SimpleNamespace) -> Setting:
    """The setting ``name`` (``dataset/small`` or ``dataset/large``)."""
    ds_name, size_name = name.split("/")
    if ds_name == "parts":
        return parts_setting(size_name, cfg)
    if ds_name == "fmnist":
        return fmnist_setting(size_name, cfg)
    return paper_setting(name, cfg)


def load_settings(cfg: SimpleNamespace) -> dict[str, Setting]:
    """Every setting of ``cfg.settings``, in order (one line printed per setting); the paper settings' inputs are
    checked first (:func:`check_paper_inputs`)."""
    check_paper_inputs(cfg)
    settings = {}
    for name in cfg.settings:
        settings[name] = S = make_setting(name, cfg)
        print(f"{name}: {S.model_label}; grid {S.grid}; {len(S.x_train)} train / {len(S.x_eval)} eval images; "
              f"blocks {S.blocks}")
    return settings


@dataclass
class Caches:
    """The cached tokens of one unpruned pass per image set: ``train`` and ``eval``, each ``{setting: SplitCache}``
    (``train``: made when first read, :class:`OnDemand`)."""

    train: dict
    eval: dict


class OnDemand(dict):
    """A dict whose missing key ``k`` is made by ``make(k)`` when first read, then kept."""

    def __init__(self, make) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key):
        self[key] = value = self._make(key)
        return value


def cache_settings(settings: dict[str, Setting], cfg: SimpleNamespace) -> Caches:
    """One unpruned pass per image set (:class:`Caches`), the training images' when first needed (training heads:
    not when they are loaded, :mod:`.cached_heads`). The linear probe of ``parts/large`` is fitted on the cached
    training features, and its logits follow from it."""
    cache_tr = OnDemand(lambda name: split.cache_tokens(settings[name].model, settings[name].x_train,
                                                        settings[name].blocks, dtype=cfg.dtype))
    cache_ev = {}
    for name, S in settings.items():
        cache_ev[name] = split.cache_tokens(S.model, S.x_eval, S.blocks, dtype=cfg.dtype)
        if name == "parts/large":
            S.info["probe_loss"] = fit_linear_head(S.model, cache_tr[name].features, S.y_train,
                                                   len(synthetic.CLASS_NAMES), cfg.seed)
            with torch.no_grad():
                for c in (cache_tr[name], cache_ev[name]):
                    c.logits = S.model.head(c.features)
    return Caches(cache_tr, cache_ev)


def settings_table(settings: dict[str, Setting], cache_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """Per setting: model, grid, image counts, and the unpruned top-1 with its bootstrap interval."""
    rows = []
    for name, S in settings.items():
        ci = intervals.bootstrap_ci(metrics.correct(cache_ev[name].logits, S.y_eval).astype(float), n_boot=cfg.n_boot,
                                    seed=cfg.seed)
        rows.append({"setting": name, "model": S.model_label, "grid": f"{S.grid[0]}x{S.grid[1]}",
                     "patch_tokens": S.patch_tokens, "blocks": ",".join(map(str, S.blocks)), "n_train": len(S.x_train),
                     "n_eval": len(S.x_eval), "top1_unpruned": ci.estimate, "top1_low": ci.low, "top1_high": ci.high})
    return pd.DataFrame(rows)


def part_model_name(cfg: SimpleNamespace) -> str:
    """The base model of ``parts/small`` at ``cfg``'s profile (its ``_smoke`` version at the smoke profile)."""
    return f"{chosen.FINE_GRAINED}_smoke" if cfg.profile == "smoke" else chosen.FINE_GRAINED


def fmnist_model_name(cfg: SimpleNamespace) -> str:
    """The base model of ``fmnist/small`` at ``cfg``'s profile (its ``_smoke`` version at the smoke profile)."""
    return FMNIST_MODELS["small"] + ("_smoke" if cfg.profile == "smoke" else "")
