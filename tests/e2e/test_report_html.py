"""The audit page: written by `mempipe report --html`, opened in a real headless browser
(Debian's chromium; `.ci/run` installs it): every chart rendered, no script error logged, and
nothing fetched from the network."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CHARTS = 5


def browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no chromium: .ci/run installs Debian's")
    return found


@pytest.mark.prefect
def test_the_audit_page_renders_every_chart_offline(store_url, tmp_path) -> None:
    from mempipe.flows.backfill import backfill_flow
    from mempipe.flows.replay import replay_flow
    from mempipe.flows.report import audit_report_flow

    chromium = browser()
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

    rendered = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = rendered.stdout
    for index in range(CHARTS):
        chart = re.search(rf'<div id="figure-{index}"[^>]*class="[^"]*js-plotly-plot', dom)
        assert chart, f"chart {index} was not drawn"
    assert dom.count('class="main-svg"') >= CHARTS
    console = [line for line in rendered.stderr.splitlines() if ":CONSOLE" in line]
    assert not [line for line in console if "Uncaught" in line or "rror" in line], console
