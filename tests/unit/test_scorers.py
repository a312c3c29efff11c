"""Scorer invariants: each is what its paper's equation says, on random attention rows."""
import numpy as np
import pytest
import torch

from tokenprune.core.scorers import SCORERS, TokenContext, get_scorer, select_topk, topk_descending_order


def _ctx(B=3, H=6, N=17, p=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    attn = torch.rand(B, H, N, N, generator=g).softmax(-1)
    return TokenContext(x=torch.randn(B, N, 8, generator=g), num_prefix_tokens=p, block_index=3,
                        cls_attn=attn[:, :, 0], attn=attn)


def test_cls_attention_is_head_mean_of_cls_row():
    ctx = _ctx()
    assert torch.allclose(get_scorer("cls_attention")(ctx), ctx.attn[:, :, 0, 1:].mean(1))


def test_variance_is_population_variance_over_heads():
    ctx = _ctx()
    want = ctx.cls_attn[:, :, 1:].var(dim=1, unbiased=False)
    assert torch.allclose(get_scorer("attention_variance")(ctx), want, atol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_eq6_as_printed_is_identically_zero(seed):
    s = get_scorer("attention_variance_eq6")(_ctx(seed=seed))
    assert s.abs().max() < 1e-8


def test_ties_go_to_lower_index():
    keep, rest = select_topk(torch.zeros(2, 10), 4)
    assert keep.tolist() == [[0, 1, 2, 3]] * 2
    assert rest.tolist() == [[4, 5, 6, 7, 8, 9]] * 2


def _tied_scores(g: torch.Generator, shape: tuple, levels: int) -> torch.Tensor:
    """Scores drawn from ``levels`` values, so most rows hold long runs of exact ties; a third of the draws also
    hold NaN, -inf, inf and both zeros."""
    values = torch.tensor([0.5, -0.25, 1.0, 0.0, 3.0, -2.0])[:levels]
    s = values[torch.randint(0, levels, shape, generator=g)]
    if torch.rand(1, generator=g) < 1 / 3:
        special = torch.tensor([float("nan"), -float("inf"), float("inf"), -0.0, 0.0])
        mask = torch.rand(shape, generator=g) < 0.2
        s[mask] = special[torch.randint(0, len(special), shape, generator=g)][mask]
    return s


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_the_order_an_onnx_export_traces_is_the_stable_sort_on_ties(dtype):
    g = torch.Generator().manual_seed(0)
    tied_rows = rows = 0
    for _ in range(300):
        n = int(torch.randint(1, 260, (1,), generator=g))
        shape = (int(torch.randint(1, 5, (1,), generator=g)), n) if torch.rand(1, generator=g) < 0.7 else (2, 3, n)
        s = _tied_scores(g, shape, int(torch.randint(1, 7, (1,), generator=g))).to(dtype)
        want = torch.sort(s, dim=-1, descending=True, stable=True).indices
        assert torch.equal(topk_descending_order(s), want), (shape, s)
        flat = s.reshape(-1, n).float().nan_to_num(nan=7.0)
        tied_rows += sum(len(torch.unique(r)) < n for r in flat)
        rows += flat.shape[0]
    assert tied_rows > 0.9 * rows   # the inputs are mostly ties: the tie-break is what is compared


def test_medad_uses_lower_median_for_even_heads():
    # one patch, 6 heads: values 0..5 -> lower median 2 (numpy would give 2.5)
    a = torch.tensor([0.0, 1, 2, 3, 4, 5]).view(1, 6, 1)
    cls = torch.cat([torch.zeros(1, 6, 1), a], dim=2)
    ctx = TokenContext(x=torch.zeros(1, 2, 4), num_prefix_tokens=1, block_index=0, cls_attn=cls)
    # |a - 2| = 2,1,0,1,2,3 -> sorted 0,1,1,2,2,3 -> lower median = 1 (numpy: 1.5)
    assert get_scorer("attention_medad")(ctx).item() == 1.0
    assert np.median(np.abs(a.numpy().ravel() - np.median(a.numpy()))) == 1.5


def test_inverse_negates():
    ctx = _ctx()
    assert torch.equal(get_scorer("inverse:cls_attention")(ctx), -get_scorer("cls_attention")(ctx))


def test_tokens_to_tokens_needs_full_map():
    assert get_scorer("tokens_to_tokens").needs == {"attn"}
    assert get_scorer("cls_attention").needs == {"cls_attn"}


def test_random_is_reproducible_with_generator():
    a = _ctx()
    a.extras["generator"] = torch.Generator().manual_seed(1)
    b = _ctx()
    b.extras["generator"] = torch.Generator().manual_seed(1)
    assert torch.equal(get_scorer("random")(a), get_scorer("random")(b))


def test_every_attention_scorer_returns_one_score_per_prunable_token():
    """Every scorer that reads only attention (core, EViT and 2507.19175 variants)."""
    get_scorer("attention_cv2")  # loads the plugin modules
    names = [n for n, s in SCORERS.items()
             if s.fn.__module__ in ("tokenprune.core.scorers", "tokenprune.methods.evit", "tokenprune.methods.varmedad")]
    assert {"cls_attention", "attention_variance", "attention_medad_midpoint"} <= set(names)
    for name in names:
        ctx = _ctx(p=2)
        assert get_scorer(name)(ctx).shape == (3, 15), name


def test_unknown_scorer_error_lists_names():
    with pytest.raises(ValueError, match="scorer: unknown name 'x'; accepted:.*attention_medad"):
        get_scorer("x")
