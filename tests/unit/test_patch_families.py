"""The families whose attention reads positions: timm's Eva (rope) and VisionTransformerRelPos (relative position
bias). Unpruned equals timm on both attention paths; every method prunes by its schedule; the position rule (a
token standing for one original token keeps its rope row / bias rows, a merged one has none) checked against timm's
own code fed the expected positions; save/load, deepcopy and gradient checkpointing."""
import copy
import io
import warnings

import pytest
import timm
import torch
from timm.layers import apply_keep_indices_nlc

import tokenprune  # noqa: F401  (registers the methods and the families)
from tokenprune.core.families import gather_rel_pos_bias, gather_rope, token_positions
from tokenprune.core.patch import class_token_of, patch, prune_state
from tokenprune.core.schedule import Schedule, token_counts
from tokenprune.methods.tome import tome_schedule

CONFIGS = [
    ("eva02_tiny_patch14_224", dict(img_size=56, depth=4), 56),
    ("eva02_tiny_patch14_224", dict(img_size=56, depth=4, use_post_norm=True, qkv_bias_separate=True), 56),
    ("vit_small_patch16_rope_224", dict(img_size=64, depth=4), 64),
    ("vit_small_patch16_rope_mixed_224", dict(img_size=64, depth=4), 64),
    ("vit_medium_patch16_rope_reg1_gap_256", dict(img_size=64, depth=4), 64),
    ("vit_relpos_small_patch16_224", dict(img_size=64, depth=4), 64),
    ("vit_relpos_medium_patch16_cls_224", dict(img_size=64, depth=4), 64),
    ("vit_srelpos_small_patch16_224", dict(img_size=64, depth=4), 64),
    ("vit_relpos_small_patch16_rpn_224", dict(img_size=64, depth=4), 64),
]
IDS = ["eva02", "eva02_postnorm", "rope", "rope_mixed", "rope_reg1_gap", "relpos_gap", "relpos_cls", "srelpos",
       "relpos_rpn"]


def _model(name, kw):
    kw = dict(kw)
    separate = kw.pop("qkv_bias_separate", False)  # an EvaAttention option Eva does not pass on
    torch.manual_seed(0)
    m = timm.create_model(name, **kw).eval()
    for blk in m.blocks:
        if hasattr(blk.attn, "qkv_bias_separate"):
            blk.attn.qkv_bias_separate = separate
    with torch.no_grad():  # timm zero-initialises some biases; random ones exercise every term
        for n, p in m.named_parameters():
            if n.endswith("bias") or "rel_pos" in n or "q_bias" in n or "v_bias" in n:
                p.normal_(0, 0.2)
    return m


def _pair(name, kw):
    ref = _model(name, kw)
    new = _model(name, kw)
    new.load_state_dict(ref.state_dict())
    return ref, new


def _patch(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pooling heads warn that they pool what remains
        return patch(model, **kw)


def _explicit(model):
    for mod in model.modules():
        if hasattr(mod, "fused_attn"):
            mod.fused_attn = False
    return model


def _methods(model):
    """(name, patch options, prefix-excluded tokens each reducer adds) for the methods the model can run."""
    n = model.patch_embed.num_patches
    rates, locs = tome_schedule(3, n, 4)
    out = [("tome", dict(keep_rate=rates, locations=locs, reducer="bipartite", prop_attn=True), 0),
           ("random", dict(keep_rate=0.6, locations=(2, 3), scorer="random", reducer="drop", seed=3), 0)]
    if class_token_of(model):
        out += [("evit", dict(keep_rate=0.6, locations=(2, 3)), 1),
                ("bat", dict(keep_rate=0.5, locations=(2, 3), reducer="merge_dpcknn",
                             reducer_options={"num_clusters": 2}), 2)]
    return out


@pytest.mark.parametrize("explicit", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("name,kw,size", CONFIGS, ids=IDS)
def test_unpruned_equals_timm_and_each_method_prunes_by_its_schedule(name, kw, size, explicit):
    ref, new = _pair(name, kw)
    if explicit:
        _explicit(ref), _explicit(new)
    x = torch.randn(2, 3, size, size)
    with torch.inference_mode():
        want = ref(x)
    for method, options, adds in _methods(ref):
        _patch(new, **{**options, "keep_rate": 1.0})
        with torch.inference_mode():
            assert torch.allclose(new(x), want, atol=1e-5, rtol=0), method
            new.keep_rate = options["keep_rate"]
            out = new(x)
        assert out.shape == want.shape and torch.isfinite(out).all(), method
        sched = Schedule.build(4, options["keep_rate"], options["locations"])
        assert prune_state(new).token_counts == token_counts(new.patch_embed.num_patches, 4, sched,
                                                             new.num_prefix_tokens, adds), method


@pytest.mark.parametrize("name,kw,size", CONFIGS, ids=IDS)
def test_attention_statistics_path_computes_timms_attention(name, kw, size):
    """The attention that returns statistics (taken where a block reduces) equals timm's, fused and explicit."""
    m = _patch(_model(name, kw), keep_rate=1.0, locations=(2,), reducer="bipartite")
    blk = m.blocks[1]
    with torch.inference_mode():
        x = m.patch_embed(torch.randn(2, 3, size, size))
        if hasattr(m, "_pos_embed"):
            x, position = m._pos_embed(x)
            position = position[1] if getattr(m, "rope_mixed", False) else position
        else:
            x = torch.cat([m.cls_token.expand(2, -1, -1), x], 1) if m.cls_token is not None else x
            position = m.shared_rel_pos.get_bias() if m.shared_rel_pos is not None else None
        ops = blk._tp_ops
        for fused in (True, False):
            blk.attn.fused_attn = fused
            want, _ = ops.attention_residual(blk, x, frozenset(), None, position)
            for needs in ({"cls_attn", "keys"}, {"attn"}):
                got, stats = ops.attention_residual(blk, x, frozenset(needs), None, position)
                assert torch.allclose(got, want, atol=1e-5, rtol=0), (fused, needs)
            assert stats["attn"].shape == (2, blk.attn.num_heads, x.shape[1], x.shape[1])
            assert torch.allclose(stats["attn"].sum(-1), torch.ones(()), atol=1e-5)


def test_token_positions_one_source_keeps_it_several_have_none():
    source = torch.tensor([[[1., 0, 0, 0], [0, 0, 2, 0], [0, 1, 0, 1], [0, 0, 0, 0.5]]])
    assert token_positions(source).tolist() == [[0, 2, -1, 3]]


def test_gather_rope_rows_of_the_positions_and_identity_without_one():
    rope = torch.randn(6, 8)
    got = gather_rope(rope, torch.tensor([[4, -1, 0]]))
    assert got.shape == (1, 1, 3, 8)
    assert torch.equal(got[0, 0, 0], rope[4]) and torch.equal(got[0, 0, 2], rope[0])
    assert got[0, 0, 1].tolist() == [0.0] * 4 + [1.0] * 4  # sin 0, cos 1: no rotation
    per_head = torch.randn(2, 3, 6, 8)  # [B, H, N, 2d] after patch dropout of a mixed rope
    got = gather_rope(per_head, torch.tensor([[5, 1], [2, 2]]))
    assert torch.equal(got[1, 2, 0], per_head[1, 2, 2]) and torch.equal(got[0, 1, 0], per_head[0, 1, 5])


def test_gather_rel_pos_bias_rule_with_and_without_a_class_token():
    bias = torch.randn(1, 2, 5, 5)
    pos = torch.tensor([[0, 3, -1]])
    with_cls = gather_rel_pos_bias(bias, pos, has_class_token=True)
    assert torch.equal(with_cls[0, :, 1, 0], bias[0, :, 3, 0]) and torch.equal(with_cls[0, :, 1, 1], bias[0, :, 3, 3])
    assert torch.equal(with_cls[0, :, 2, 1], bias[0, :, 0, 3]) and torch.equal(with_cls[0, :, 1, 2], bias[0, :, 3, 0])
    without = gather_rel_pos_bias(bias, pos, has_class_token=False)
    assert torch.equal(without[0, :, :2, :2], bias[0][:, [0, 3]][:, :, [0, 3]])
    assert not without[0, :, 2].any() and not without[0, :, :, 2].any()


def _after_location(model, x, index):
    """The tokens leaving block ``index`` (after its reduction) and the model's features, from one call."""
    seen = {}
    handle = model.blocks[index].register_forward_hook(lambda mod, args, out: seen.setdefault("x", out))
    with torch.inference_mode():
        feats = model.forward_features(x)
    handle.remove()
    return seen["x"], feats


def _kept_positions(model, index, p):
    """Original indices (prefix included) of the tokens left after the traced reduction at block ``index``."""
    keep = prune_state(model).history[0]["keep_idx"]
    assert prune_state(model).history[0]["block"] == index
    return torch.cat([torch.arange(p).expand(keep.shape[0], p), keep + p], 1)


@pytest.mark.parametrize("name,kw,size,fuse", [
    ("eva02_tiny_patch14_224", dict(img_size=56, depth=4), 56, False),
    ("eva02_tiny_patch14_224", dict(img_size=56, depth=4), 56, True),
    ("vit_small_patch16_rope_mixed_224", dict(img_size=64, depth=4), 64, True),
], ids=["eva02_drop", "eva02_fuse", "rope_mixed_fuse"])
def test_eva_blocks_after_a_reduction_see_timms_rope_of_the_kept_patches(name, kw, size, fuse):
    """timm's own blocks, fed the rope rows timm's patch dropout would keep (``apply_keep_indices_nlc``) and an
    unrotated row for the fused token, compute what the pruned model computes after the reduction."""
    m = _patch(_model(name, kw), keep_rate=1 - 1 / 16 if not fuse else 0.5, locations=(2,), trace=True,
               reducer="fuse_attention" if fuse else "drop")
    x = torch.randn(2, 3, size, size)
    tokens, feats = _after_location(m, x, 1)
    p = m.num_prefix_tokens
    keep = _kept_positions(m, 1, p)[:, p:] - p
    with torch.inference_mode():
        _, rope = m._pos_embed(m.patch_embed(x))
        y = tokens
        for i in (2, 3):
            r = rope[i] if getattr(m, "rope_mixed", False) else rope
            kept = apply_keep_indices_nlc(y, r, keep)
            kept = kept.unsqueeze(1) if kept.dim() == 3 else kept
            if fuse:
                d = kept.shape[-1] // 2
                unrotated = torch.cat([kept.new_zeros(d), kept.new_ones(d)]).expand(*kept.shape[:2], 1, 2 * d)
                kept = torch.cat([kept, unrotated], 2)
            y = m.blocks[i](y, rope=kept)  # called without a pruning call: timm's block
        want = m.norm(y)
    assert tokens.shape[1] == p + keep.shape[1] + int(fuse)
    assert torch.allclose(feats, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name,kw,fuse", [
    ("vit_relpos_small_patch16_224", dict(img_size=64, depth=4), False),
    ("vit_relpos_medium_patch16_cls_224", dict(img_size=64, depth=4), True),
    ("vit_srelpos_small_patch16_224", dict(img_size=64, depth=4), False),
], ids=["relpos_gap_drop", "relpos_cls_fuse", "srelpos_drop"])
def test_relpos_blocks_after_a_reduction_see_the_bias_of_the_kept_positions(name, kw, fuse):
    """timm's own blocks, fed as ``shared_rel_pos`` the bias rows and columns of the kept tokens' positions (the
    class token's for the fused token), compute what the pruned model computes after the reduction."""
    m = _patch(_model(name, kw), keep_rate=1 - 1 / 16 if not fuse else 0.5, locations=(2,), trace=True,
               reducer="fuse_attention" if fuse else "drop", scorer="cls_attention" if fuse else "random", seed=0)
    x = torch.randn(2, 3, 64, 64)
    tokens, feats = _after_location(m, x, 1)
    pos = _kept_positions(m, 1, m.num_prefix_tokens)
    if fuse:
        pos = torch.cat([pos, torch.zeros(2, 1, dtype=torch.long)], 1)  # the fused token takes [CLS]'s rows
    with torch.inference_mode():
        y = tokens
        for i in (2, 3):
            blk = m.blocks[i]
            full = blk.attn.rel_pos.get_bias() if blk.attn.rel_pos is not None else m.shared_rel_pos.get_bias()
            bias = torch.stack([full[0][:, p][:, :, p] for p in pos])
            own, blk.attn.rel_pos = blk.attn.rel_pos, None
            try:
                y = blk(y, shared_rel_pos=bias)  # timm's block, its own bias given as the shared one
            finally:
                blk.attn.rel_pos = own
        want = m.norm(y)
    assert torch.allclose(feats, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name,kw,size", [CONFIGS[0], CONFIGS[4], CONFIGS[6], CONFIGS[7]],
                         ids=["eva02", "rope_reg1_gap", "relpos_cls", "srelpos"])
def test_save_load_and_deepcopy_give_equal_outputs(name, kw, size):
    m = _patch(_model(name, kw), **_methods(_model(name, kw))[0][1])
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    x = torch.randn(2, 3, size, size)
    with torch.inference_mode():
        want = m(x)
        assert torch.equal(loaded(x), want) and torch.equal(copy.deepcopy(m)(x), want)
    assert prune_state(loaded).token_counts == prune_state(m).token_counts


def _grads(model, x, y):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same dropout draws in both runs (the relative-position MLP has dropout)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name,kw,size,method", [
    ("eva02_tiny_patch14_224", dict(img_size=56, depth=4, num_classes=5), 56, "evit"),
    ("vit_medium_patch16_rope_reg1_gap_256", dict(img_size=64, depth=4, num_classes=5), 64, "tome"),
    ("vit_relpos_medium_patch16_cls_224", dict(img_size=64, depth=4, num_classes=5), 64, "bat"),
    ("vit_srelpos_small_patch16_224", dict(img_size=64, depth=4, num_classes=5), 64, "tome"),
], ids=["eva02_evit", "rope_gap_tome", "relpos_cls_bat", "srelpos_tome"])
def test_gradient_checkpointing_gives_the_gradients_of_a_plain_run(name, kw, size, method):
    options = dict((k, v) for k, v, _ in _methods(_model(name, kw)))[method]
    plain = _patch(_model(name, kw).train(), **options)
    ckpt = _patch(_model(name, kw).train(), **options)
    ckpt.set_grad_checkpointing(True)
    x, y = torch.randn(2, 3, size, size), torch.tensor([1, 2])
    loss_a, ga = _grads(plain, x, y)
    loss_b, gb = _grads(ckpt, x, y)
    assert torch.allclose(loss_a, loss_b, atol=1e-6)
    assert ga.keys() == gb.keys() and len(ga) > 10
    if "relpos" in name:  # the bias is recomputed with the block, so its parameters get their gradients
        assert any("rel_pos" in n for n in ga)
    for n in ga:
        assert torch.allclose(ga[n], gb[n], atol=1e-5, rtol=1e-4), n
    assert prune_state(ckpt).token_counts == prune_state(plain).token_counts


@pytest.mark.parametrize("name,kw", [("vit_medium_patch16_rope_reg1_gap_256", dict(img_size=64, depth=2)),
                                     ("vit_relpos_small_patch16_224", dict(img_size=64, depth=2))],
                         ids=["rope_reg1_gap", "relpos_gap"])
def test_cls_attention_methods_are_refused_without_a_class_token(name, kw):
    with pytest.raises(ValueError, match="scorer"):
        _patch(timm.create_model(name, **kw), keep_rate=0.5, locations=(1,))


@pytest.mark.parametrize("name,kw,size,options", [
    ("eva02_tiny_patch14_224", dict(img_size=56, depth=4), 56, dict(keep_rate=0.5, locations=(2, 3))),
    ("vit_medium_patch16_rope_reg1_gap_256", dict(img_size=64, depth=4), 64,
     dict(keep_rate=0.5, locations=(2, 3), scorer="random", reducer="drop")),
    ("vit_relpos_medium_patch16_cls_224", dict(img_size=64, depth=4), 64, dict(keep_rate=0.5, locations=(2, 3))),
    ("vit_srelpos_small_patch16_224", dict(img_size=64, depth=4), 64,
     dict(keep_rate=0.5, locations=(2, 3), scorer="random", reducer="drop")),
], ids=["eva02_evit", "rope_reg1_gap_drop", "relpos_cls_evit", "srelpos_drop"])
def test_pruned_analytic_macs_equal_the_counted_ones(name, kw, size, options):
    m = _patch(_model(name, kw), **options)
    assert tokenprune.analytic_macs(m, img_size=size).total == tokenprune.measured_macs(m, img_size=size)
