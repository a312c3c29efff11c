"""The study page (reports/index.html) opened in a real headless browser: filters, links, nothing fetched."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tokenprune.study import claims as C
from tokenprune.study import publish, site
from tokenprune.study import report as R
from tokenprune.study import verdicts as V

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def _declaration(cid: str, paper: str, kind: str, setting: str, on_holds: str) -> C.Declaration:
    return C.Declaration(id=cid, paper=paper, statement=f"statement of {cid}", quote='"q"', where="Table 1", kind=kind,
                         on_rule_holds=on_holds, paper_number=None, rule=None, unit="points", effect=None,
                         premises=(), setting=setting, section="§1", family=None, would_decide=None,
                         headline=cid.endswith("a"))


CLAIMS = {
    "01_evit": [("evit.a", "evit", "paper claim", "proxy", "reproduced", V.REPRODUCED),
                ("evit.b", "evit", "paper claim", "analytic at paper scale", "reproduced", V.NOT_REPRODUCED),
                ("evit.c", "evit", "consistency check", "from the sources", "consistent", V.REPRODUCED),
                ("evit.d", "evit", "reviewer objection", "proxy", "rejected", V.REPRODUCED)],
    "02_diversity_merging": [("bat.a", "bat", "paper claim", "proxy", "reproduced", V.REPRODUCED),
                             ("bat.b", "bat", "our hypothesis", "proxy", "supported", V.INCONCLUSIVE)],
}


@pytest.fixture()
def reports(tmp_path: Path) -> Path:
    root = tmp_path / "reports"
    for nb, rows in CLAIMS.items():
        rep = R.Report(nb, root / nb, profile="default", title=nb)
        for cid, paper, kind, setting, on_holds, engine in rows:
            decision = V.Decision(engine, "" if engine == V.REPRODUCED else "the interval straddles 0", "rule")
            C.file_claim(rep, _declaration(cid, paper, kind, setting, on_holds), decision, our_value=1.5,
                         ci=[1.0, 2.0])
        table = rep.claims_table("§1")
        rep.write()
        # the executed notebook's HTML, as nbconvert writes a section's claims table
        (root / nb / f"{nb}.html").write_text(f"<html><body><h1>{nb}</h1>{table._repr_html_()}</body></html>")
        results = json.loads((root / nb / "results.json").read_text())
        from tokenprune.study.findings import findings, findings_markdown

        (root / nb / publish.FINDINGS_FILE).write_text(findings_markdown(findings(results), link=""))
    site.write_site(root)
    return root


def test_the_page_lists_every_claim_with_its_fields(reports: Path):
    text = (reports / site.SITE_FILE).read_text()
    for rows in CLAIMS.values():
        for cid, *_ in rows:
            assert f'#claim-{cid}"' in text
    assert "http://" not in text and "https://" not in text and "src=\"http" not in text


def _driver():
    if not (CHROMIUM and DRIVER):
        if os.environ.get("CI") == "true":
            pytest.fail("chromium and chromium-driver are required under CI (.ci/run installs them)")
        pytest.skip("chromium / chromedriver not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


def _requested(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def test_filters_links_and_no_request_leaves_the_machine(reports: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = _driver()
    try:
        driver.get((reports / site.SITE_FILE).as_uri())
        rows = driver.find_elements(By.CSS_SELECTOR, "#claims tbody tr")
        assert len(rows) == sum(len(v) for v in CLAIMS.values())
        Select(driver.find_element(By.ID, "filter-paper")).select_by_value("evit")
        Select(driver.find_element(By.ID, "filter-verdict")).select_by_value("reproduced")
        visible = [r.get_attribute("data-id") or r.find_element(By.TAG_NAME, "a").text
                   for r in driver.find_elements(By.CSS_SELECTOR, "#claims tbody tr") if r.is_displayed()]
        results = json.loads((reports / "01_evit" / "results.json").read_text())["claims"]
        expected = [c["id"] for c in results if c["verdict"] == "reproduced"]
        assert visible == expected and driver.find_element(By.ID, "shown").text == str(len(expected))
        Select(driver.find_element(By.ID, "filter-kind")).select_by_value("consistency check")
        assert not [r for r in driver.find_elements(By.CSS_SELECTOR, "#claims tbody tr") if r.is_displayed()]
        Select(driver.find_element(By.ID, "filter-paper")).select_by_value("")
        Select(driver.find_element(By.ID, "filter-verdict")).select_by_value("")
        shown = [r for r in driver.find_elements(By.CSS_SELECTOR, "#claims tbody tr") if r.is_displayed()]
        assert len(shown) == 1
        shown[0].find_element(By.TAG_NAME, "a").click()
        assert driver.current_url.endswith("01_evit/01_evit.html#claim-evit.c")
        assert driver.find_element(By.ID, "claim-evit.c").is_displayed()
        requested = _requested(driver)
        assert requested and all(u.startswith(("file:", "data:")) for u in requested), requested
    finally:
        driver.quit()


def _width_report(root: Path) -> None:
    """A notebook whose claims are as wide as the study's get: a long unbroken id and unit, a full-length why."""
    from tokenprune.study.why import MAX_WHY

    rep = R.Report("01_evit", root / "01_evit", profile="default", title="01_evit")
    for n in range(3):
        cid = f"evit.t7.same_macs_higher_accuracy_than_the_unpruned_model.deit_s.keep0_{n}"
        decl = C.Declaration(id=cid, paper="evit", statement="a statement of many words " * 8, quote='"q"',
                             where="Table 7", kind="paper claim", on_rule_holds="reproduced", paper_number=None,
                             rule=None, unit="GMACs_per_image_at_224_px_with_the_fused_token", effect=None,
                             premises=(), setting="analytic at paper scale", section="§1", family=None,
                             would_decide=None, headline=False)
        reason = ("the interval 1.530 [1.198, 1.861] lies above the tolerance " * 6)[:MAX_WHY]
        C.file_claim(rep, decl, V.Decision(V.NOT_REPRODUCED, reason, "rule"), our_value=1234.5678,
                     ci=[1001.25, 1499.75])
    rep.claims_table("§1")
    rep.write()
    site.write_site(root)


def test_the_page_reads_at_its_width_without_scrolling_sideways(tmp_path: Path):
    """At :data:`site.READS_AT_PX` the claims table, verdict and why columns included, fits the window."""
    _width_report(tmp_path)
    driver = _driver()
    try:
        driver.set_window_size(site.READS_AT_PX, 900)
        driver.get((tmp_path / site.SITE_FILE).as_uri())
        fit = driver.execute_script(
            "var th=document.querySelectorAll('#claims thead th');"
            "return {window: window.innerWidth, page: document.documentElement.scrollWidth,"
            " verdict: th[th.length-2].getBoundingClientRect().right, why: th[th.length-1].getBoundingClientRect().right,"
            " names: Array.from(th).map(function(x){return x.textContent;})};")
        assert fit["names"][-2:] == ["verdict", "why"]
        assert fit["window"] <= site.READS_AT_PX
        assert fit["page"] <= fit["window"] and fit["why"] <= fit["window"], fit
    finally:
        driver.quit()


def test_every_surface_shows_the_same_tally(reports: Path):
    """The README's findings, the ledger, each report's findings and the study page (read in the browser) give each
    notebook's tally, and the study's, in the same words."""
    from selenium.webdriver.common.by import By

    from tokenprune.study.ledger import build_ledger, load_results
    from tokenprune.study.tally import tally, tally_text

    results = load_results(reports)
    expected = {r["_dir"]: tally_text(tally(r["claims"])) for r in results}
    expected["all"] = tally_text(tally(c for r in results for c in r["claims"]))
    readme, ledger = publish.readme_findings(reports), build_ledger(reports)
    for nb, text in expected.items():
        assert text in readme and text in ledger
        if nb != "all":
            assert text in (reports / nb / publish.FINDINGS_FILE).read_text()
    driver = _driver()
    try:
        driver.get((reports / site.SITE_FILE).as_uri())
        shown = {e.get_attribute("data-notebook"): e.text for e in driver.find_elements(By.CSS_SELECTOR, ".tally")}
    finally:
        driver.quit()
    assert shown == expected
