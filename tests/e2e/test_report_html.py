"""The audit page: written by `mempipe report --html`, opened in a real headless browser
(Debian's chromium; `.ci/run` installs it): the title names the store and the period, the totals
and runs come first, every chart is drawn with its axis titles, an empty one says so and hints
at the other ``--by``, no script error is logged, nothing is fetched from the network, and the
page stays small."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.processes import opened

ROOT = Path(__file__).parents[2]
AT_MOST_BYTES = 1_500_000


@pytest.mark.prefect
def test_the_audit_page_renders_every_chart_offline(store_url, tmp_path) -> None:
    from mempipe.flows.backfill import backfill_flow
    from mempipe.flows.replay import replay_flow
    from mempipe.flows.report import audit_report_flow

    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    sample = ROOT / "examples" / "sample-archive"
    backfill_flow(paths=[str(sample)], user_id="maya", store=store_url, config=str(config))
    replay_flow(store=store_url, config=str(config), audit_dir=str(tmp_path / "audit"))
    page = tmp_path / "report.html"
    summary = audit_report_flow(out=str(tmp_path / "audit"), html=str(page), store=store_url)
    assert summary.html == str(page.resolve())
    html = page.read_text()
    assert not re.search(r"<script[^>]+src=", html), "no script fetched at view time"
    assert page.stat().st_size <= AT_MOST_BYTES

    dom, console = opened(page, tmp_path / "report.png")
    title = re.search(r"<h1>(.*?)</h1>", dom)[1]
    assert title == f"mempipe audit of {store_url}, the first day to today"
    headings = re.findall(r"<h2>(.*?)</h2>", dom)
    assert headings[:2] == ["Totals", "Runs"], "the totals and the runs first"
    assert "<td>semantic</td><td>UPDATE</td><td>2</td>" in dom
    for index in (0, 2, 3):  # actions, reinforced, updated; the sample's replay fails nothing
        chart = re.search(rf"<div id=\"figure-{index}\".*?</svg>", dom, re.S)
        assert chart, f"chart {index} was not drawn"
    assert "No failures recorded in this period." in dom
    assert "No provider request recorded in this period" in dom, "an offline replay spends nothing"
    for axis in ("Day (UTC)", "Audit rows", "Times reinforced", "Version"):
        assert f">{axis}</text>" in dom, f"no axis titled {axis!r}"
    assert not [line for line in console if "Uncaught" in line or "rror" in line], console


@pytest.mark.prefect
def test_an_empty_audit_page_says_so_and_points_at_the_other_days(store_url, tmp_path) -> None:
    from mempipe.flows.backfill import backfill_flow
    from mempipe.flows.report import audit_report_flow

    sample = ROOT / "examples" / "sample-archive"
    backfill_flow(paths=[str(sample)], user_id="maya", store=store_url)
    page = tmp_path / "empty.html"
    audit_report_flow(out=str(tmp_path / "audit"), html=str(page), store=store_url)
    assert page.stat().st_size < 20_000, "no chart to draw: no plotting script either"

    dom, console = opened(page, tmp_path / "empty.png")
    empty = re.findall(r"<p class=\"empty\">(.*?)</p>", dom)
    assert empty[0] == "No audit rows."
    assert "write the page again with --by observed." in dom
    assert "No failures recorded in this period." in empty
    assert "<td>backfill</td><td>completed</td>" in dom, "the runs table has the backfill"
    assert "<svg" not in dom
    assert not [line for line in console if "Uncaught" in line or "rror" in line], console
