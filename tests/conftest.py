import os
import sys
from pathlib import Path

import pytest

#: ``TOKENPRUNE_TEST_CPU=avx2`` runs the suite as on a CPU with AVX2 only, whatever this one has: torch dispatches its
#: kernels at AVX2 (``ATEN_CPU_CAPABILITY``, read when torch loads, inherited by every subprocess and notebook kernel)
#: and the library is told there is no AVX-512, AMX or native bf16 (the fixture below)
SIMULATED_CPU = os.environ.get("TOKENPRUNE_TEST_CPU", "")
if SIMULATED_CPU not in ("", "avx2"):
    raise pytest.UsageError(f"TOKENPRUNE_TEST_CPU={SIMULATED_CPU!r}: accepted values are 'avx2' or unset")
if SIMULATED_CPU:
    os.environ["ATEN_CPU_CAPABILITY"] = SIMULATED_CPU

#: under pytest-xdist (``make test`` runs one worker per core) each worker and the notebook kernels it starts compute on
#: one thread, so the workers do not oversubscribe the cores
XDIST_WORKER = "PYTEST_XDIST_WORKER" in os.environ
if XDIST_WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after ATEN_CPU_CAPABILITY and the thread count are set)

# tests run on 2 cores next to other work: keep torch from oversubscribing
torch.set_num_threads(1 if XDIST_WORKER else min(2, os.cpu_count() or 1))
os.environ.setdefault("TOKENPRUNE_NO_DOWNLOAD", "1")
# tests/release_fixtures.py (the paper datasets' release formats) is shared by the tiers
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _simulated_cpu(monkeypatch):
    """Under ``TOKENPRUNE_TEST_CPU=avx2``: /proc/cpuinfo's flags without the AVX-512 and AMX ones, and torch's bf16
    probe false, so ``core.precision`` decides (kernels, bf16) as it does on an AVX2-only CPU."""
    if not SIMULATED_CPU:
        return
    from tokenprune.core import precision

    flags = precision.cpu_flags()
    avx2_only = frozenset(f for f in flags if not f.startswith(("avx512", "amx")))
    monkeypatch.setattr(precision, "cpu_flags", lambda: avx2_only)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)


def pytest_collection_modifyitems(items):
    """Mark each test by its tier: its folder (tests/unit, tests/smoke, tests/paper)."""
    for item in items:
        tier = item.path.parent.name
        if tier in ("unit", "smoke", "paper"):
            item.add_marker(getattr(pytest.mark, tier))
