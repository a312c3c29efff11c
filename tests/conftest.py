import os
import sys
from pathlib import Path

import pytest
import torch

# tests run on 2 cores next to other work: keep torch from oversubscribing
torch.set_num_threads(min(2, os.cpu_count() or 1))
os.environ.setdefault("TOKENPRUNE_NO_DOWNLOAD", "1")
# tests/release_fixtures.py (the paper datasets' release formats) is shared by the tiers
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_collection_modifyitems(items):
    """Mark each test by its tier: its folder (tests/unit, tests/smoke, tests/paper)."""
    for item in items:
        tier = item.path.parent.name
        if tier in ("unit", "smoke", "paper"):
            item.add_marker(getattr(pytest.mark, tier))
