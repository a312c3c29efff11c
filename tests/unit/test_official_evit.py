"""measure.official_evit: the official evit.py is loaded from the checkout each call names (cached per checkout),
so a directory without it is refused even after another checkout was loaded in the same process."""
import pytest

from tokenprune.measure import official_evit as O


def _checkout(path, marker: str):
    path.mkdir()
    (path / "evit.py").write_text(f"from helpers import X\nWHERE = {marker!r}\n")
    (path / "helpers.py").write_text("X = 1\n")
    return path


def test_loader_is_cached_per_checkout_and_refuses_a_directory_without_evit_py(tmp_path):
    a = O.load_official_evit(_checkout(tmp_path / "a", "a"))
    assert a.WHERE == "a" and O.load_official_evit(tmp_path / "a") is a
    assert O.load_official_evit(_checkout(tmp_path / "b", "b")).WHERE == "b"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError) as e:
        O.load_official_evit(tmp_path / "empty")
    assert "evit.py" in str(e.value)
