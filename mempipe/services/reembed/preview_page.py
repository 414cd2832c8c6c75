"""A move's preview as one page, in the audit page's style: the whole move's plan, the sample
planned beside what it spent, each collection's sample and neighbour agreement, and the gate's
predicted decision. It holds figures only, no record's text; it is written beside a replay
preview's pages."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from mempipe.adapters.llm.kept import PAGES
from mempipe.schemas.costs import RunPlan
from mempipe.schemas.reembed import ReembedPreview
from mempipe.services.report.page import STYLE, table


def write_reembed_preview_page(preview: ReembedPreview, folder: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    path = folder / PAGES / f"reembed-preview-{stamp}.html"
    title = f"Move preview: {preview.model} on {preview.store}"
    collections = [
        {
            "collection": c.collection,
            "serving": c.serving_model or "none",
            "records": c.records,
            "sampled": c.sampled,
            "refused": c.unembeddable,
            "failed": c.failed,
            "neighbour agreement": "-" if c.neighbour_agreement is None else c.neighbour_agreement,
        }
        for c in preview.collections
    ]
    spent = [
        {"model": s.model, "requests": s.requests, "input tokens": s.input_tokens}
        for s in preview.spent
    ]
    gate = preview.gate
    decision = (
        "<p class='empty'>No labelled queries (--gate): the neighbour agreement above is the "
        "measure.</p>"
        if gate is None
        else f"<p>{gate.queries} queries on {html.escape(gate.source)}: recall@{gate.k} old "
        f"{gate.old_recall} (measured), new {gate.new_recall} (from the sample), ratio "
        f"{gate.ratio} (min {gate.min_ratio}): "
        f"<strong>{'would switch' if gate.passes else 'would not switch'}</strong>; the old "
        f"model's from the sample, as the new one's is estimated: "
        f"{gate.old_recall_from_sample}</p>"
    )
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p class='period'>a sample of up to {preview.sample:,} records a collection (seed "
        f"{preview.seed}); nothing was written to the store</p>"
        "<h2>The sample</h2>"
        + table(list(collections[0]) if collections else [], collections, "No collection.")
        + "<h2>The recall gate, predicted</h2>"
        + decision
        + "<h2>Planned and spent</h2>"
        + f"<p>the sample: {_plan_line(preview.sample_plan)}; spent:</p>"
        + table(["model", "requests", "input tokens"], spent, "Nothing (a local model).")
        + f"<p>the whole move: {_plan_line(preview.plan)}</p></body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(path.name + ".writing")
    aside.write_text(page, encoding="utf-8")
    aside.replace(path)
    return path.resolve()


def _plan_line(plan: RunPlan) -> str:
    cost = plan.cost.live_usd
    priced = "unpriced" if cost is None else f"${cost:.4f} live"
    return html.escape(f"{plan.requests:,} requests, {plan.input_tokens:,} input tokens, {priced}")
