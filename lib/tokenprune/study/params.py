"""Notebook parameters and profiles.

Each notebook's profile table (``smoke``, ``default``, ``paper``: every setting the notebook reads) lives in
its settings module, ``tokenprune.study.<paper>.settings.PROFILES`` (notebook 00's: ``tokenprune.study.proxy.chosen.
PROFILES``; :data:`AUDITS` maps a notebook to its module), so each parameter is written once. A notebook's
``parameters`` cell names ``profile`` and ``overrides`` (a dict of changes to the profile's settings);
:func:`setup` merges them and checks every name and type, and the pipeline calls the same check before a notebook
starts, so a wrong parameter fails at once with a message naming it and the accepted values, not deep inside an
experiment.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping

from tokenprune.core import precision
from tokenprune.utils.environment import PROFILES

__all__ = ["PROFILES", "AUDITS", "check_profile", "resolve", "profile_table", "setup", "check_overrides"]


#: notebook stem -> the settings module holding its ``PROFILES`` table
AUDITS: dict[str, str] = {
    "00_proxy_calibration": "tokenprune.study.proxy.chosen",
    "01_evit": "tokenprune.study.evit.settings",
    "02_diversity_merging": "tokenprune.study.bat.settings",
    "03_variance_medad": "tokenprune.study.varmedad.settings",
    "04_decoupling": "tokenprune.study.decoupling.settings",
}


def check_profile(profile: Any) -> str:
    """Validate ``profile``: one of :data:`PROFILES`."""
    if profile not in PROFILES:
        raise ValueError(f"profile: unknown {profile!r}; accepted: {list(PROFILES)}")
    return profile


def _type_ok(value: Any, like: Any) -> bool:
    if like is None or value is None:
        return True
    if isinstance(like, bool):
        return isinstance(value, bool)
    if isinstance(like, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(like, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(like, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return False
        return not like or all(_type_ok(v, like[0]) for v in value)
    return isinstance(value, type(like))


def _describe(like: Any) -> str:
    if isinstance(like, (list, tuple)):
        return f"a list of {type(like[0]).__name__}" if like else "a list"
    return type(like).__name__


def resolve(profile: str, table: Mapping[str, Mapping[str, Any]], **given: Any) -> SimpleNamespace:
    """Settings for ``profile`` from ``table[profile]``, overridden by every ``given`` value that is not None.

    Raises ValueError naming a parameter that the table does not know (with the accepted names) or whose
    type differs from the profile's value (with the expected type and, for ``choices``, the accepted values).
    ``table`` may hold a ``"choices"`` entry: ``{param: [accepted values]}``, and a ``"ranges"`` entry:
    ``{param: (low, high)}``, inclusive bounds (None: open), checked on the value or each value of a list.
    A ``dtype`` (or ``*_dtype``) of ``auto`` is resolved here for this machine's CPU (:func:`precision.resolve_dtype`),
    so a notebook and its report see the precision it computed in.
    """
    check_profile(profile)
    if profile not in table:
        raise ValueError(f"profile: {profile!r} is not defined for this notebook; accepted: "
                         f"{[p for p in table if p not in ('choices', 'ranges')]}")
    base = dict(table[profile])
    choices = table.get("choices", {})
    for name, value in given.items():
        if name not in base:
            raise ValueError(f"{name}: not a parameter of this notebook; accepted: {sorted(base)}")
        if value is None:
            continue
        if not _type_ok(value, base[name]):
            raise ValueError(f"{name}: expected {_describe(base[name])} (profile {profile!r} uses {base[name]!r}), "
                             f"got {type(value).__name__} {value!r}")
        base[name] = value
    for name, accepted in choices.items():
        vals = base[name] if isinstance(base[name], (list, tuple)) else [base[name]]
        bad = [v for v in vals if v not in accepted]
        if bad:
            raise ValueError(f"{name}: {bad!r} not accepted; accepted: {list(accepted)}")
    for name, (low, high) in table.get("ranges", {}).items():
        if name not in base:
            raise ValueError(f"ranges: {name!r} is not a parameter of this notebook; accepted: {sorted(base)}")
        vals = base[name] if isinstance(base[name], (list, tuple)) else [base[name]]
        bad = [v for v in vals if (low is not None and v < low) or (high is not None and v > high)]
        if bad:
            span = f"{'-inf' if low is None else low}..{'inf' if high is None else high}"
            shown = bad if isinstance(base[name], (list, tuple)) else bad[0]
            raise ValueError(f"{name}: {shown!r} out of range; accepted: values in {span}")
    for name in [n for n in base if (n == "dtype" or n.endswith("_dtype")) and base[n] == precision.AUTO_DTYPE]:
        base[name] = precision.resolve_dtype(base[name], "cpu")
    return SimpleNamespace(profile=profile, **base)


def profile_table(notebook: str) -> Mapping[str, Mapping[str, Any]]:
    """The profile table of ``notebook`` (a stem of :data:`AUDITS`)."""
    import importlib

    if notebook not in AUDITS:
        raise ValueError(f"notebook: unknown {notebook!r}; accepted: {sorted(AUDITS)}")
    return importlib.import_module(AUDITS[notebook]).PROFILES


def setup(notebook: str, profile: str, overrides: Mapping[str, Any] | None = None) -> SimpleNamespace:
    """The settings of ``notebook`` at ``profile`` with ``overrides`` applied, every name and type checked
    (see :func:`resolve`)."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ValueError(f"overrides: expected a mapping of parameter names to values, got {type(overrides).__name__}")
    return resolve(profile, profile_table(notebook), **dict(overrides or {}))


def check_overrides(notebook: str, profile: str, overrides: Mapping[str, Any]) -> None:
    """Check ``overrides`` before ``notebook`` runs (the pipeline, batches): against its profile table when the
    notebook has an audit module (:data:`AUDITS`), else only that ``profile`` is known."""
    if notebook in AUDITS:
        setup(notebook, profile, overrides)
    else:
        check_profile(profile)
