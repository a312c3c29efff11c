"""Notebook reports: what one notebook produces, written atomically.

A notebook builds one :class:`Report`, registers the premises its claims declare, files claims
(:func:`tokenprune.study.claims.file_claim`), adds tables, figures and values, and calls :meth:`Report.write`. That
writes, under the notebook's report folder (``reports/<name>/`` by default), one CSV per table, one PNG per figure
and ``results.json``, each atomically (temporary file in the same folder, then ``os.replace``), ``results.json``
last, so a reader never sees a half-written file and ``results.json`` only lists files that exist.
``results.json`` carries the provenance: git commit, parameters, seed, library versions, hardware, wall time and a
UTC timestamp. :func:`read_results` reads one back, refusing a truncated file or a claim that is not accepted; the
claims ledger built from these files is :mod:`tokenprune.study.ledger`.
"""

from __future__ import annotations

import dataclasses
import html
import io
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from tokenprune.study.claims import ALL_VERDICTS, Claim
from tokenprune.utils.environment import REPO_ROOT, provenance
from tokenprune.utils.io import InputError, atomic_write_bytes, atomic_write_text, dumps_json, read_json

__all__ = ["VERDICTS", "RESULTS_FILE", "Report", "ClaimsTable", "reports_dir_for", "read_results", "show_inline"]

VERDICTS: tuple[str, ...] = ALL_VERDICTS
"""The accepted verdicts (each kind's own words, then the undecided ones), in the order the ledger counts them."""

RESULTS_FILE = "results.json"
SCHEMA_VERSION = 2
FIGURE_DPI = 120
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def reports_dir_for(profile: str) -> Path:
    """Where a run at ``profile`` writes by default: the committed ``reports/`` for ``default`` only; any other
    profile writes to the git-ignored ``runs/<profile>/``, so a smoke or paper run never overwrites the
    committed default reports (pass a folder explicitly to write elsewhere)."""
    return REPO_ROOT / "reports" if profile == "default" else REPO_ROOT / "runs" / profile


class ClaimsTable:
    """The claims one notebook section decides, as a notebook shows them: an HTML table whose rows are anchors
    ``claim-<id>``; ``frame`` is the same as a DataFrame."""

    COLUMNS = ("claim", "kind", "setting", "verdict")

    def __init__(self, section: str, claims: Sequence[Claim]) -> None:
        self.section = section
        self.rows = [(c.id, c.kind, c.setting, c.verdict) for c in claims]

    @property
    def frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(self.COLUMNS))

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"claims decided in {self.section}:\n" + "\n".join("  ".join(r) for r in self.rows)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{c}</th>" for c in self.COLUMNS)
        body = "".join(
            f'<tr id="claim-{html.escape(r[0])}">' + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>"
            for r in self.rows)
        caption = f"<caption>Claims decided in {html.escape(self.section)}</caption>"
        return f'<table class="claims">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _file_stem(name: str, ext: str) -> str:
    stem = name[: -len(ext)] if name.endswith(ext) else name
    if not _NAME_RE.match(stem):
        raise ValueError(f"name {name!r} must match {_NAME_RE.pattern} (it becomes a file name)")
    return stem


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and hasattr(shell, "kernel")


def show_inline(png: bytes | None = None, caption: str = "", label: str = "") -> None:
    """Inside a notebook kernel, display ``caption`` (as ``**label.** caption``) and the PNG; elsewhere nothing."""
    if not _in_notebook():
        return
    from IPython.display import Image, Markdown, display

    if caption:
        display(Markdown(f"**{label}.** {caption}" if label else caption))
    if png is not None:
        display(Image(data=png, format="png"))


class Report:
    """What one notebook produces: claims, tables, figures and values, written atomically.

    ``out_dir`` is this notebook's own folder (default :func:`reports_dir_for` ``(profile) / name``). Tables and figures
    are rendered when added (a later change to the DataFrame or Figure is not picked up);
    nothing touches the disk until :meth:`write`.
    """

    def __init__(
        self,
        name: str,
        out_dir: str | os.PathLike[str] | None = None,
        params: Mapping[str, Any] | None = None,
        profile: str = "default",
        title: str | None = None,
        seed: int | None = None,
    ) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(f"name {name!r} must match {_NAME_RE.pattern}")
        self.name = name
        self.title = title or name
        self.out_dir = Path(out_dir) if out_dir is not None else reports_dir_for(profile) / name
        self.params: dict[str, Any] = dict(params or {})
        self.profile = profile
        self.seed = seed if seed is not None else self.params.get("seed")
        self._started = time.perf_counter()
        self._claims: list[Claim] = []
        self._premises: dict[str, Any] = {}
        self._tables: dict[str, str] = {}
        self._figures: dict[str, bytes] = {}
        self.values: dict[str, Any] = {}

    @property
    def claims(self) -> tuple[Claim, ...]:
        return tuple(self._claims)

    def add_claim(self, claim: Claim) -> Claim:
        """File a :class:`~tokenprune.study.claims.Claim` (made by :func:`tokenprune.study.claims.file_claim` from
        its declaration); its profile defaults to the report's. Claim ids must be unique in a report."""
        if not isinstance(claim, Claim):
            raise TypeError(f"claim: a tokenprune.study.claims.Claim, got {type(claim).__name__}")
        if not claim.profile:
            claim = dataclasses.replace(claim, profile=self.profile)
        if any(c.id == claim.id for c in self._claims):
            raise ValueError(f"duplicate claim id {claim.id!r} in report {self.name!r}")
        self._claims.append(claim)
        return claim

    def add_premise(self, premise: Any) -> Any:
        """Register ``premise`` (a :class:`tokenprune.study.verdicts.Premise`) under its name, before any claim that
        declares it is filed; registering a name twice is refused."""
        if premise.name in self._premises:
            raise ValueError(f"premise: {premise.name!r} is registered twice in report {self.name!r}")
        self._premises[premise.name] = premise
        return premise

    def premise(self, name: str) -> Any:
        """The premise registered as ``name`` (a claim declaring an unregistered premise cannot be filed)."""
        try:
            return self._premises[name]
        except KeyError:
            raise ValueError(f"premise: {name!r} is not registered in report {self.name!r} "
                             f"(registered: {sorted(self._premises)})") from None

    def claims_table(self, section: str) -> "ClaimsTable":
        """The claims filed so far that ``section`` decides (id, kind, setting, verdict), shown under the section in
        its notebook; in HTML each row is the claim's anchor (``#claim-<id>``), where the study page links to."""
        return ClaimsTable(section, [c for c in self._claims if c.section == section])

    def rename_claims(self, ids: Mapping[str, str]) -> None:
        """Give the filed claims of ``ids`` (old id -> new id) their new ids, in place (e.g. a paper-scale id once
        the model a claim was measured on is known to be the paper's); an id not filed, or a new id that would
        repeat one, is refused."""
        known = {c.id for c in self._claims}
        unknown = sorted(set(ids) - known)
        if unknown:
            raise ValueError(f"ids: not filed in report {self.name!r}: {unknown}")
        after = [ids.get(c.id, c.id) for c in self._claims]
        if len(set(after)) != len(after):
            raise ValueError(f"ids: renaming {dict(ids)} would repeat a claim id in report {self.name!r}")
        self._claims = [dataclasses.replace(c, id=new) for c, new in zip(self._claims, after)]

    def add_table(self, name: str, df: Any, index: bool | None = None, caption: str = "") -> Path:
        """Render a pandas DataFrame to ``<name>.csv`` (written by :meth:`write`); inside a notebook a
        ``caption`` is shown (the cell's last expression then shows the table under it).

        The index is written when ``index`` is True, or by default when it is not a plain
        0..n-1 range. Returns the path the file will have.
        """
        stem = _file_stem(name, ".csv")
        if index is None:
            import pandas as pd

            idx = df.index
            index = not (isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1 and idx.name is None)
        self._tables[f"{stem}.csv"] = df.to_csv(index=index, lineterminator="\n")
        if caption:
            show_inline(caption=caption, label=f"Table {stem}")
        return self.out_dir / f"{stem}.csv"

    def add_figure(self, name: str, fig: Any, caption: str = "", dpi: int = FIGURE_DPI) -> Path:
        """Render a matplotlib Figure to ``<name>.png`` at ``dpi`` (written by :meth:`write`) and, inside a
        notebook, show it inline under ``caption`` (one line: what to look at)."""
        stem = _file_stem(name, ".png")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        self._figures[f"{stem}.png"] = buf.getvalue()
        show_inline(png=buf.getvalue(), caption=caption, label=f"Figure {stem}")
        return self.out_dir / f"{stem}.png"

    def add_value(self, key: str, value: Any) -> None:
        """Record a free-form value (number, string, list, dict, numpy/torch scalar) in results.json."""
        self.values[key] = value

    def to_dict(self) -> dict[str, Any]:
        """The content of results.json (provenance taken now)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "title": self.title,
            "profile": self.profile,
            "params": self.params,
            "provenance": provenance(self.params, self.seed, self._started, cwd=self.out_dir),
            "claims": [c.to_dict() for c in self._claims],
            "tables": sorted(self._tables),
            "figures": sorted(self._figures),
            "values": self.values,
        }

    def write(self) -> Path:
        """Write tables, figures, then results.json, each atomically; return results.json's path.

        results.json is encoded before any file is touched, so an unserialisable value fails
        the write without changing anything on disk.
        """
        text = dumps_json(self.to_dict())
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for fname, csv in sorted(self._tables.items()):
            atomic_write_text(self.out_dir / fname, csv)
        for fname, png in sorted(self._figures.items()):
            atomic_write_bytes(self.out_dir / fname, png)
        return atomic_write_text(self.out_dir / RESULTS_FILE, text)


def read_results(path: str | os.PathLike[str], validate: bool = True) -> dict[str, Any]:
    """The content of one ``results.json`` (:meth:`Report.write`'s), its ``name`` defaulting to its folder's name.
    With ``validate`` each claim is rebuilt by :meth:`Claim.from_dict`, so its verdict is one its kind accepts;
    without, each claim need only carry an ``id`` and a ``verdict`` (results of an older schema are read as stored).
    A missing, truncated or non-JSON file, or a claim that is not accepted, is an :class:`InputError` naming the
    file (and the claim)."""
    p = Path(path)
    data = read_json(p, f"rerun the notebook that writes it, or remove {p.parent}", kind="the report")
    data.setdefault("name", p.parent.name)
    claims = data.get("claims", [])
    if not isinstance(claims, list):
        raise InputError(f"{p}: claims: expected a list of claims, got {type(claims).__name__}")
    data["claims"] = [_read_claim(p, i, c, validate) for i, c in enumerate(claims)]
    return data


def _read_claim(path: Path, index: int, claim: Any, validate: bool) -> dict[str, Any]:
    """The ``index``-th claim of ``path`` as a dict (validated when ``validate``), or an InputError naming both."""
    ident = claim.get("id") if isinstance(claim, Mapping) else None
    try:
        if not isinstance(claim, Mapping):
            raise ValueError(f"expected a claim (a JSON object), got {type(claim).__name__}")
        if validate:
            return Claim.from_dict(claim).to_dict()
        missing = [k for k in ("id", "verdict") if k not in claim]
        if missing:
            raise ValueError(f"missing claim fields: {', '.join(missing)}")
        return dict(claim)
    except (ValueError, TypeError) as exc:
        why = str(exc).removeprefix(f"claim {ident}: ")
        raise InputError(f"{path}: claim {ident or f'number {index + 1}'}: {why}") from None
