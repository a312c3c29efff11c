"""The cache recheck tells another CPU's rounding from a real change: a cache built at one CPU capability passes
when rechecked at another (the matrix products' kernels changed too), both ways; another checkpoint or another
configuration is refused; the rule itself (tokenprune.training.recheck) returns each of its outcomes."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from tokenprune.core.config import UNPRUNED, PruneConfig
from tokenprune.training import recheck

# the capability a CPU without AVX-512 runs, with the matrix products held to the same instruction set; on a CPU that
# has no more than AVX2 itself, the portable kernels stand in as the other CPU
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PORTABLE = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}

# measures the first 64 test images of a committed 64-token candidate unpruned and pruned by every configuration
# (top-k with fusion, random and min-k selection, ToMe) and saves the logits; with a second path, again with every
# weight moved by a relative 1e-3 (another checkpoint)
_MEASURE = r"""
import sys, numpy as np, torch
from tokenprune.training import base_models
from tokenprune.training.proxy import outputs as po, round2
c = next(c for c in round2.CANDIDATES if c.name == "s14d_fmnist112")
load = base_models.load_base_model
def save(path):
    arrays, _ = po.measure(c, n=64)
    np.savez(path, **{k.replace("/", "|"): v for k, v in arrays.items()})
save(sys.argv[1])
if len(sys.argv) > 2:
    def moved(*a, **k):
        m, info = load(*a, **k)
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(1.001)
        return m, info
    base_models.load_base_model = moved
    save(sys.argv[2])
print(torch.backends.cpu.get_cpu_capability())
"""


def _load(path):
    with np.load(path) as z:
        return {k.replace("|", "/"): z[k] for k in z.files}


def _start(env_extra, *paths):
    """One measurement in its own process on one thread (the environment must be set before torch loads)."""
    env = {**os.environ, **env_extra, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", _MEASURE, *map(str, paths)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True), paths


def _finish(started):
    proc, paths = started
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    return [_load(p) for p in paths], out.strip().splitlines()[-1]


def _recheck_all(fresh, cached):
    from tokenprune.training.proxy import outputs as po, round2

    c = next(c for c in round2.CANDIDATES if c.name == "s14d_fmnist112")
    configs = {cfg.label: cfg for cfg in po.ots_configs(c.tokens, 12, po.tome_r_of(c))}
    return {k[7:]: recheck.compare(k[7:], fresh[k], cached[k], recheck.is_continuous(configs.get(k[7:])))
            for k in fresh if k.startswith("logits/")}


@pytest.mark.slow
def test_a_cache_built_on_one_cpu_passes_on_another_and_a_real_change_is_refused(tmp_path):
    native_cap = torch.backends.cpu.get_cpu_capability()
    other_env = AVX2_ONLY if native_cap not in ("AVX2", "DEFAULT") else PORTABLE
    started = [_start({}, tmp_path / "native.npz", tmp_path / "perturbed.npz"),
               _start(other_env, tmp_path / "other.npz")]
    ((native, perturbed), cap), ((other,), other_cap) = map(_finish, started)
    assert cap == native_cap
    assert other_cap != native_cap
    assert np.array_equal(native["labels"], other["labels"])
    # built natively, rechecked at the other capability, and the reverse
    for fresh, cached in ((other, native), (native, other)):
        checks = _recheck_all(fresh, cached)
        assert len(checks) == 7 and all(r.ok for r in checks.values()), {k: r for k, r in checks.items() if not r.ok}
        assert checks["unpruned"].continuous and checks["random@0.5"].continuous
        assert not checks["tome@r4"].continuous and not checks["fuse@0.7"].continuous
    # the kernels did change: the logits are not bit for bit the same
    assert any(not np.array_equal(native[k], other[k]) for k in native if k.startswith("logits/"))
    # another checkpoint (every weight moved by 0.1 %) is refused on every configuration
    assert not any(r.ok for r in _recheck_all(perturbed, native).values())
    # another configuration (another keep rate, another scorer) is refused
    assert not recheck.compare("fuse@0.7", native["logits/fuse@0.5"], native["logits/fuse@0.7"], False).ok
    assert not recheck.compare("fuse@0.5", native["logits/mink@0.5"], native["logits/fuse@0.5"], False).ok


def test_the_rule_returns_each_outcome():
    base = np.zeros((64, 10))
    assert recheck.compare("x", base, base, True).ok
    one = base.copy()
    one[5, 2] = 0.05
    assert not recheck.compare("x", one, base, continuous=True).ok       # continuous: no image may move
    r = recheck.compare("x", one, base, continuous=False)                  # a near tie: accepted
    assert r.ok and r.moved == 1 and r.allowed == 4 and r.agreeing_max == 0.0 and r.worst == pytest.approx(0.05)
    five = base.copy()
    five[:5] += 0.05
    assert not recheck.compare("x", five, base, continuous=False).ok     # more than a sixteenth: refused
    nan = base.copy()
    nan[0, 0] = np.nan
    assert recheck.compare("x", nan, base, continuous=False).moved == 1
    with pytest.raises(ValueError, match="fresh"):
        recheck.compare("x", base[:3], base, True)


def test_continuity_follows_the_configuration():
    assert recheck.is_continuous(None) and recheck.is_continuous(UNPRUNED)
    assert recheck.is_continuous(PruneConfig(keep_rate=0.5, scorer="random"))
    assert recheck.is_continuous(PruneConfig(keep_rate=0.5, scorer="centre", reducer="drop"))
    assert not recheck.is_continuous(PruneConfig(keep_rate=0.7))
    assert not recheck.is_continuous(PruneConfig(keep_rate=0.5, scorer="random", reducer="merge_dpcknn"))
    assert not recheck.is_continuous(PruneConfig(keep_rate=(1.0, 0.9), reducer="bipartite", scorer="cls_attention"))
    assert recheck.is_continuous(PruneConfig(keep_rate=(1.0, 1.0)))
