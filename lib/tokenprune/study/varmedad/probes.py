"""Notebook 03's label-free and mask-based probes of the falsification test: on real photos through the real
pretrained ViT-S/14 (faithfulness of the final [CLS] feature, objection 3), and on SynthBirds' exact object masks
(the background share of the kept high-variance patches, the review's settle-it test b)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from tokenprune.core import split_forward as split
from tokenprune.core.schedule import num_keep
from tokenprune.core.scorers import select_topk
from tokenprune.measure import coverage, evaluation, intervals
from tokenprune.measure import rank_statistics as rankstats
from tokenprune.measure.evaluation import predict
from tokenprune.measure.power import Design
from tokenprune.study import verdicts
from tokenprune.study.proxy import chosen
from tokenprune.study.varmedad.claims import CLAIMS, PHOTO_LOW, PHOTO_RANDOM
from tokenprune.study.claims import unmeasured
from tokenprune.study.varmedad.designs import FAMILY, binding_gate, cluster_bootstrap_ci, cluster_design, file
from tokenprune.study.varmedad.settings import EFFECTS, LOCS, R_AGGRESSIVE, R_MAIN
from tokenprune.study.varmedad.sweep import fs
from tokenprune.training import base_models as models, checkpoints
from tokenprune.training.recipe import TrainRecipe

__all__ = ["photo_faithfulness", "background_share"]


def photo_faithfulness(rep, subjects: SimpleNamespace, T: float, seed: int) -> pd.DataFrame:
    """Objection 3 on real photos and the real pretrained ViT-S/14 (no labels): cosine of the final [CLS]
    feature to the unpruned one per configuration, paired differences; files the claim."""
    photo_cfgs = [fs("attention_variance", T, name="variance"), fs("attention_medad", T, name="medad"),
                  fs("cls_attention", T, name="mean_eq8"), fs("inverse:attention_variance", T, name="low_variance"),
                  fs("random", T, name="random"), fs("attention_cv2", T, name="cv2")]
    vit14, x_photo = subjects.vit14, subjects.x_photo
    zeros = torch.zeros(len(x_photo), dtype=torch.long)
    full_feat = subjects.cache_photo.features
    photo_cos = {}
    for c in photo_cfgs:
        c.apply(vit14, seed=seed)
        f = predict(vit14, x_photo, zeros, batch=16, dtype="fp32").logits
        photo_cos[c.label] = F.cosine_similarity(f, full_feat, dim=-1).numpy()
    evaluation.UNPRUNED.apply(vit14)
    rows, grp = [], subjects.photo_groups
    n_photos = len(set(grp))
    for name, v in photo_cos.items():
        ci = cluster_bootstrap_ci(v, grp, seed=seed)
        rows.append({"config": name, "cosine_to_unpruned": ci.estimate, "low": ci.low, "high": ci.high})
    for a, b in (("variance", "low_variance"), ("variance", "random"), ("cv2", "random"), ("variance", "mean_eq8")):
        d = cluster_bootstrap_ci(photo_cos[a] - photo_cos[b], grp, seed=seed)
        rows.append({"config": f"{a} - {b}", "cosine_to_unpruned": d.estimate, "low": d.low, "high": d.high})
    d = cluster_bootstrap_ci(photo_cos["variance"] - photo_cos["low_variance"], grp, seed=seed)
    d2 = cluster_bootstrap_ci(photo_cos["variance"] - photo_cos["random"], grp, seed=seed)
    k1, k2 = PHOTO_LOW, PHOTO_RANDOM
    decl = CLAIMS["varmedad.obj3.photos_vit_s14"]
    # the unit is the photo (its crops share content): per-photo mean differences, all the photos the notebook has
    eff, scale = EFFECTS["photo_cosine"], f"the {n_photos} photos the notebook has (data.sample_photos)"
    det, bind = binding_gate([(k, eff, cluster_design(photo_cos["variance"] - photo_cos[b], grp, "photos", n_photos,
                                                      scale), bool(ci.low > 0 or ci.high < 0))
                              for k, b, ci in ((k1, "low_variance", d), (k2, "random", d2))])
    decision = decl.rule().decide({k1: (d.estimate, d.low, d.high), k2: (d2.estimate, d2.low, d2.high)})
    file(rep, decl, det.gate(decision), our_value=round(d.estimate, 4), ci=[d.low, d.high], design=det.record(),
         why=f"cosine variance - low variance {verdicts.fmt_interval(d.estimate, d.low, d.high, nd=4)}, - random "
             f"{verdicts.fmt_interval(d2.estimate, d2.low, d2.high, nd=4)}, {len(x_photo)} crops of {n_photos} photos",
         details={PHOTO_LOW: [d.estimate, d.low, d.high], PHOTO_RANDOM: [d2.estimate, d2.low, d2.high],
                  "binding part": bind, "design": det.design.text()})
    return pd.DataFrame(rows)


def background_share(rep, cfg: SimpleNamespace) -> pd.DataFrame:
    """The review's settle-it test (b): how often the high-variance patches are background, on SynthBirds (exact
    object masks; its background is drawn independently of the class, so it is uninformative). Per image: the
    background share of the kept top-``ceil(rN)`` patches minus the background share of all patches (0 = what a
    random set gives), at blocks 4/7/10 of the unpruned trained model, r = 0.6 and 0.3, for variance, MedAD, the
    head mean and random. The claim (block 4, r = 0.6, variance) is decided by :data:`BACKGROUND_RULE`."""
    decl = CLAIMS["varmedad.settle.background_share"]

    def untestable(why: str) -> pd.DataFrame:
        file(rep, decl, verdicts.not_testable(why[:190]), keys={"on": ""}, premises=unmeasured(decl, why),
             details={"why": why})
        return pd.DataFrame()

    if not cfg.birds_model:
        return untestable(f"profile {cfg.profile!r} names no birds_model")
    try:
        model, info = models.load_base_model(cfg.birds_model, train_if_missing=cfg.profile == "smoke", progress=False)
    except checkpoints.CheckpointMissingError as err:
        return untestable(str(err))
    recipe = TrainRecipe.from_dict(info["recipe"])
    if recipe.dataset != "synth_birds":
        return untestable(f"birds_model {cfg.birds_model!r} is trained on {recipe.dataset!r}, which has no object "
                          "masks")
    from tokenprune.data.synthetic import SPLIT_OFFSETS, make_part_dataset

    kw = dict(recipe.dataset_kwargs)
    n_test, seed, size = kw.pop("n_test"), kw.pop("seed", 0), kw.pop("img_size", recipe.img_size)
    kw.pop("n_train", None), kw.pop("n_val", None)
    idx = np.sort(np.random.default_rng(cfg.seed).choice(n_test, size=min(cfg.n_birds, n_test), replace=False))
    # the test split's images and masks, regenerated alone (image i depends only on (seed, i))
    arr = make_part_dataset(len(idx), seed, size, indices=SPLIT_OFFSETS["test"] + idx, **kw)
    x_u8 = torch.from_numpy(arr["image"]).permute(0, 3, 1, 2).contiguous()
    obj = coverage.mask_to_patch_grid(torch.as_tensor(arr["part_mask"] > 0), model.patch_embed.patch_size,
                                      grid=model.patch_embed.grid_size)
    bg = ~obj                                                                   # no object pixel in the patch
    cache = split.cache_tokens(model.eval(), model.tp_preprocess(x_u8), LOCS, batch=cfg.eval_batch, dtype="fp32")
    gen = torch.Generator().manual_seed(cfg.seed)
    rows, share_all, main_d = [], bg.float().mean(1), None
    for loc in LOCS:
        sc = rankstats.score_rows(cache.cls_attn[loc], ["attention_variance", "attention_medad", "cls_attention"],
                                  cache.num_prefix_tokens)
        sc["random"] = torch.rand(sc["cls_attention"].shape, generator=gen)
        # reference, not a scorer: every object patch first (ties broken at random), the lowest share reachable
        sc["object_first"] = obj.float() + 1e-3 * torch.rand(obj.shape, generator=gen)
        for r in (R_MAIN, R_AGGRESSIVE):
            k = num_keep(bg.shape[1], r)
            for name, v in sc.items():
                kept = torch.zeros_like(bg).scatter_(1, select_topk(v, k)[0], True)
                d = ((bg & kept).sum(1) / k - share_all) * 100
                if (loc, r, name) == (LOCS[0], R_MAIN, "attention_variance"):
                    main_d = d.numpy()
                ci = intervals.bootstrap_ci(d.numpy(), seed=cfg.seed)
                rows.append({"block": loc, "keep_rate": r, "scorer": name, "images": len(d),
                             "background_share_all": float(share_all.mean()),
                             "background_share_kept": float(((bg & kept).sum(1) / k).mean()),
                             "diff_points": ci.estimate, "diff_low": ci.low, "diff_high": ci.high})
    table = pd.DataFrame(rows)
    sel = table[(table.block == LOCS[0]) & (table.keep_rate == R_MAIN)].set_index("scorer")
    v = sel.loc["attention_variance"]
    # paired per image: the kept set's background share against all patches' (points), up to the full test split
    design = Design.paired(main_d, np.zeros(len(main_d)), unit="images", n_max=max(len(main_d), int(n_test)),
                           max_scale=f"the full test split of {cfg.birds_model}", scale=1.0,
                           sd_source=f"sd of the {len(main_d)} per-image differences (kept - all, points) of this run "
                                     "(independent of their mean)")
    det = verdicts.Detectable(EFFECTS["background_share"], design)
    rep.add_premise(chosen.bar_premise(cfg.birds_model, "fine-grained", family=FAMILY))
    file(rep, decl, det.gate(decl.rule().decide(v.diff_points, v.diff_low, v.diff_high, what="variance kept - all")),
         keys={"on": f" (trained {cfg.birds_model}, SynthBirds test images)"}, our_value=round(v.diff_points, 2),
         ci=[v.diff_low, v.diff_high], design=det.record(),
         why=f"background {v.background_share_all:.1%} of all patches, {v.background_share_kept:.1%} of the kept ones",
         details={"others": {n: [sel.loc[n].diff_points, sel.loc[n].diff_low, sel.loc[n].diff_high]
                             for n in ("attention_medad", "cls_attention", "random", "object_first")},
                  "reference": "chance (a random set: difference 0); object_first: the lowest reachable",
                  "images": int(v.images), "design": det.design.text()})
    return table
