"""bench --profile: per block, the operators launched, host synchronisations, the attention kernel and the time in
scoring, top-k, gather and merge; the labels exist only while profiling. Counts are asserted, never a speed."""
import copy

import pytest
import timm
import torch

from tokenprune.core.patch import patch, prune_state
from tokenprune.core.precision import set_eager_attention
from tokenprune.measure import bench_command as B
from tokenprune.measure.kernel_profile import PHASES, profile_model, profile_rows
from tokenprune.methods.tome import tome_schedule


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return timm.create_model("vit_tiny_patch16_224", img_size=64, depth=4, num_classes=10).eval()


def test_evit_blocks_split_into_phases_and_the_rest_of_the_model_is_untouched(tiny):
    m = patch(copy.deepcopy(tiny), keep_rate=0.7, locations=[1, 3])
    before = (prune_state(m).scorer, prune_state(m).reducer)
    blocks = profile_model(m, batch=2, img_size=(64, 64), passes=2)
    assert [b.block for b in blocks] == [1, 2, 3, 4]
    for b in blocks:
        assert set(b.ms) == set(PHASES) and b.ms["rest"] > 0 and b.kernels > 0 and b.syncs == 0
        assert "scaled_dot_product" in b.attention
        reduces = b.block in (1, 3)   # EViT reduces at the locations given (1-based, as the profile numbers blocks)
        assert (b.ms["scoring"] > 0) == reduces and (b.ms["top-k"] > 0) == reduces and (b.ms["gather"] > 0) == reduces
    unpruned = profile_model(copy.deepcopy(tiny), batch=2, img_size=(64, 64), passes=1)
    assert all(b.ms["scoring"] == b.ms["top-k"] == b.ms["gather"] == b.ms["merge"] == 0 for b in unpruned)
    assert blocks[0].kernels > unpruned[0].kernels       # scoring and reduction launch more
    # the labels were for the profile only: the model's scorer, reducer and hooks are as they were
    assert (prune_state(m).scorer, prune_state(m).reducer) == before
    assert all(not blk._forward_hooks and not blk._forward_pre_hooks for blk in m.blocks)
    rows = profile_rows("keep=0.7", blocks, batch=2, dtype="fp32", device="cpu")
    assert rows[-1]["block"] == "all" and rows[-1]["kernels"] == pytest.approx(sum(b.kernels for b in blocks))


def test_tome_merges_in_its_reducer_and_the_explicit_kernel_is_named(tiny):
    rates, locations = tome_schedule(4, 16, 4)
    m = patch(copy.deepcopy(tiny), keep_rate=rates, locations=locations, reducer="bipartite", prop_attn=True)
    set_eager_attention(m, True)
    blocks = profile_model(m, batch=1, img_size=(64, 64), passes=1)
    assert all(b.ms["merge"] > 0 and b.ms["top-k"] > 0 and b.ms["scoring"] == 0 for b in blocks)
    assert {b.attention for b in blocks} == {"explicit softmax(q k^T) v"}


def test_a_host_synchronisation_is_counted_in_its_block(tiny):
    m = copy.deepcopy(tiny)
    def read_a_number(mod, args, out):   # returns None: the block's output stays
        out.sum().item()

    m.blocks[2].register_forward_hook(read_a_number)
    blocks = profile_model(m, batch=1, img_size=(64, 64), passes=2)
    assert [b.syncs for b in blocks] == [0, 0, 1, 0]   # block 3 (1-based)


def test_bench_profile_prints_every_model_and_refuses_timing_options(capsys, tmp_path):
    rows = B.main(["--model", "deit_tiny_patch16_224", "--batch", "1", "--keep", "1.0", "0.7", "--tome-r", "13",
                   "--profile", "--iters", "2", "--warmup", "0", "--json", str(tmp_path / "p.json")])
    totals = {r["config"]: r for r in rows if r["block"] == "all"}
    assert set(totals) == {"keep=1", "keep=0.7", "tome r=13"}
    assert totals["keep=1"]["top-k_ms"] == 0 and totals["keep=0.7"]["top-k_ms"] > 0
    assert totals["tome r=13"]["merge_ms"] > 0 and len(rows) == 3 * 13
    assert (tmp_path / "p.json").is_file()
    with pytest.raises(SystemExit):
        B.main(["--profile", "--compile"])
    assert "--profile" in capsys.readouterr().err


def test_evit_fusion_gathers_tokens_and_sizes_once_each():
    """fuse_attention gathers the tokens, their sizes and the weights once each (kept and rest in one gather), and
    gives what gathering the kept and the rest apart gives."""
    from tokenprune.core.reducers import fuse_rest, get_reducer, keep_topk
    from tokenprune.core.scorers import TokenContext

    g = torch.Generator().manual_seed(0)
    x, cls_attn = torch.randn(2, 17, 8, generator=g), torch.rand(2, 3, 17, generator=g).softmax(-1)
    size = torch.randint(1, 4, (2, 17), generator=g).float()
    ctx = TokenContext(x=x, num_prefix_tokens=1, block_index=0, cls_attn=cls_attn, size=size)
    scores = cls_attn[:, :, 1:].mean(1)
    with torch.profiler.profile() as prof:
        out = get_reducer("fuse_attention")(ctx, scores, 11)
    assert sum(e.count for e in prof.key_averages() if e.key == "aten::gather") == 3
    apart = keep_topk(ctx, scores, 11)          # the kept tokens gathered alone, the rest by fuse_rest
    ref = fuse_rest(ctx, apart, weights=torch.gather(scores, 1, apart.rest_idx))
    assert torch.equal(out.x, ref.x) and torch.equal(out.size, ref.size) and torch.equal(out.keep_idx, ref.keep_idx)
