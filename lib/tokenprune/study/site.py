"""The browsable study: one static page, ``reports/index.html``, built from the results files.

The page works offline and fetches nothing: its styles, script, data and figures are inside it (figures as ``data:``
URIs). It shows each paper's findings (:mod:`tokenprune.study.findings`) with its forest plot
(:mod:`tokenprune.study.forest`), then every claim in one table that filters by paper, kind, setting and verdict;
each claim links to its anchor (``#claim-<id>``) in the executed notebook's HTML, where it is decided.
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["SITE_FILE", "FILTERS", "COLUMNS", "READS_AT_PX", "build_site", "write_site"]

SITE_FILE = "index.html"
#: the claim fields the table filters by
FILTERS = ("paper", "kind", "setting", "verdict")
#: the columns of the "Every claim" table and their shares of its width: a fixed layout in which long ids and units
#: wrap, so that the whole table, verdict included, fits a 1,280-px window (:data:`READS_AT_PX`)
COLUMNS = (("claim", 13), ("statement", 21), ("kind", 9), ("setting", 8), ("paper", 7), ("ours [CI]", 9),
           ("unit", 7), ("verdict", 8), ("why", 18))
#: the narrowest window the page is laid out for without scrolling sideways
READS_AT_PX = 1280

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;width:100%;font-size:.85em}th,td{border:1px solid #ddd;padding:.3em;
vertical-align:top;text-align:left;overflow-wrap:break-word}th{background:#f3f3f3}tr.hidden{display:none}
#claims{table-layout:fixed}
.filters label{margin-right:1em}.paper{margin-bottom:2em}img{max-width:100%}
details.reasoning ul{margin:.2em 0;padding-left:1.1em}
.v-for{color:#1b7837}.v-against{color:#b2182b}.v-undecided{color:#555}.v-check{color:#2166ac}
"""

_SCRIPT = """
function applyFilters(){
  var sel={};document.querySelectorAll('select[data-filter]').forEach(function(s){sel[s.dataset.filter]=s.value;});
  var shown=0;document.querySelectorAll('#claims tbody tr').forEach(function(tr){
    var ok=Object.keys(sel).every(function(k){return !sel[k]||tr.dataset[k]===sel[k];});
    tr.classList.toggle('hidden',!ok);if(ok){shown++;}});
  document.getElementById('shown').textContent=shown;}
document.addEventListener('DOMContentLoaded',function(){
  document.querySelectorAll('select[data-filter]').forEach(function(s){s.addEventListener('change',applyFilters);});
  applyFilters();});
"""


def _markdown(text: str) -> str:
    import mistune

    return mistune.html(text)


def _png_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _ours(c: Mapping[str, Any]) -> str:
    v = c.get("our_value")
    if v is None:
        return ""
    text = f"{v:.4g}" if isinstance(v, float) else str(v)
    ci = c.get("ci")
    return text + (f" [{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "")


def _side_class(c: Mapping[str, Any]) -> str:
    from tokenprune.study.forest import side_of

    return {"for the paper": "v-for", "against the paper": "v-against", "check": "v-check"}.get(side_of(c),
                                                                                               "v-undecided")


def _claim_row(nb: Mapping[str, Any], c: Mapping[str, Any]) -> str:
    data = "".join(f' data-{f}="{html.escape(str(c.get(f, "")))}"' for f in FILTERS)
    link = f"{nb['_dir']}/{nb['_dir']}.html#claim-{c['id']}"
    paper = c.get("paper_value")
    cells = [f'<a href="{html.escape(link)}">{html.escape(c["id"])}</a>', html.escape(c["statement"]),
             html.escape(c["kind"]), html.escape(c["setting"]),
             "" if paper is None else html.escape(str(paper)), html.escape(_ours(c)), html.escape(c.get("unit", "")),
             f'<span class="{_side_class(c)}">{html.escape(c["verdict"])}</span>',
             html.escape(c.get("why", "")) + _reasoning(c)]
    return f"<tr{data}>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>"


def _reasoning(c: Mapping[str, Any]) -> str:
    """The full reasoning behind a claim's one-sentence why, folded one click away: the rule (its test), the whole
    reason and its context where the why kept only part, the premises that failed and what the rule alone said."""
    details = c.get("details") or {}
    items = [("rule", c.get("test")), ("reason", details.get("reason")), ("context", details.get("context"))]
    items += [(f"premise failed: {name}", detail) for name, detail in (details.get("failed premises") or {}).items()]
    alone = details.get("rule alone")
    if alone:
        items.append(("the rule alone", f"{alone.get('verdict')}: {alone.get('why')}"))
    items += [(f"limitation: {name}", text) for name, text in (details.get("limitations") or {}).items()]
    shown = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(str(v))}</li>" for k, v in items if v)
    return f'<details class="reasoning"><summary>reasoning</summary><ul>{shown}</ul></details>' if shown else ""


def _select(field: str, values: Sequence[str]) -> str:
    options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in values)
    return (f'<label>{field} <select data-filter="{field}" id="filter-{field}"><option value="">all</option>'
            f"{options}</select></label>")


def build_site(reports_dir: str | Path = "reports") -> str:
    """The page's HTML from every ``<reports_dir>/*/results.json``: each paper's findings generated from its results
    (as the pipeline writes them into its report), with the forest plot ``findings_forest.png`` where the pipeline
    drew it."""
    from tokenprune.study.findings import compute_used, findings, findings_markdown, limitations, top_line
    from tokenprune.study.ledger import load_results
    from tokenprune.study.publish import CALIBRATION_DIR, chosen_values
    from tokenprune.study.tally import tally, tally_text

    root = Path(reports_dir)
    results = load_results(root)
    every = tally(c for nb in results for c in nb["claims"])
    chosen = chosen_values(root)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
             'style-src \'unsafe-inline\'; script-src \'unsafe-inline\'">',
             "<title>tokenprune: what the study found</title>", f"<style>{_STYLE}</style>",
             f"<script>{_SCRIPT}</script></head><body>",
             "<h1>Token pruning in Vision Transformers: what the study found</h1>",
             "<p>Generated from the notebooks' results by <code>make reproduce</code>; every number and verdict "
             "comes from the results files. Each claim links to where its notebook decides it.</p>",
             f'<p class="tally" data-notebook="all">{html.escape(tally_text(every))}</p>']
    for nb in results:
        if not nb["claims"]:
            continue
        folder = root / nb["_dir"]
        report = f"{nb['_dir']}/{nb['_dir']}.html"
        parts.append(f'<section class="paper" id="paper-{html.escape(nb["_dir"])}">')
        parts.append(f'<h2>{html.escape(str(nb.get("title") or nb["name"]))}</h2>')
        parts.append(f'<p><a href="{html.escape(report)}">the executed notebook</a>: '
                     f'<span class="tally" data-notebook="{html.escape(nb["_dir"])}">'
                     f"{html.escape(tally_text(tally(nb['claims'])))}</span></p>")
        found = findings(nb)
        body = findings_markdown(found, link=report, limits=limitations(root / CALIBRATION_DIR, nb, chosen),
                                 compute=compute_used(nb), top=top_line(nb, chosen))
        parts.append(_markdown(body.split("\n", 1)[1]))
        png = folder / "findings_forest.png"
        if png.exists():
            parts.append(f'<img alt="forest plot of {html.escape(nb["_dir"])}" src="{_png_uri(png)}">')
        parts.append("</section>")
    claims = [(nb, c) for nb in results for c in nb["claims"]]
    parts.append("<h2>Every claim</h2><div class=\"filters\">")
    for field in FILTERS:
        parts.append(_select(field, sorted({str(c.get(field, "")) for _, c in claims})))
    parts.append('</div><p><span id="shown">0</span> of ' + str(len(claims)) + " claims shown.</p>")
    cols = "".join(f'<col style="width:{share}%">' for _, share in COLUMNS)
    head = "".join(f"<th>{name}</th>" for name, _ in COLUMNS)
    parts.append(f'<table id="claims"><colgroup>{cols}</colgroup><thead><tr>{head}</tr></thead><tbody>')
    parts += [_claim_row(nb, c) for nb, c in claims]
    parts.append("</tbody></table>")
    parts.append('<script type="application/json" id="claims-data">'
                 + json.dumps([{"notebook": nb["_dir"], **{f: c.get(f) for f in ("id", *FILTERS)}}
                               for nb, c in claims]).replace("</", "<\\/") + "</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_site(reports_dir: str | Path = "reports") -> Path:
    """Build the page and write it atomically to ``<reports_dir>/index.html``."""
    from tokenprune.utils.io import atomic_write_text

    return atomic_write_text(Path(reports_dir) / SITE_FILE, build_site(reports_dir))
