"""The preview as one page, in the audit page's style: the counts, each change with its text
before and after, the memories no longer found, and the plan of the full replay.

It shows memories' text, so it is written in the kept answers' folder (``pages/``), which an
erase reaches: the page names the users it shows in a JSON block, and an erase of one of them
removes it (:func:`mempipe.adapters.llm.kept.forget_user`)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

import orjson

from mempipe.adapters.llm.kept import PAGES
from mempipe.schemas.replay import ReplayPreview
from mempipe.services.report.page import STYLE, table

STYLE_MORE = ".before{color:#8a1c1c}.after{color:#1c5e20}"


def write_preview_page(preview: ReplayPreview, kept: Path, users: list[str]) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    path = kept / PAGES / f"preview-{stamp}.html"
    versions = ", ".join(
        f"{handler}: {v.extractor}" + (f" / prompt {v.prompt_version}" if v.prompt_version else "")
        for handler, v in sorted(preview.extraction.items())
    )
    counts = [
        {
            "memory type": c.memory_type,
            "ADD": c.added,
            "UPDATE": c.updated,
            "REINFORCE": c.reinforced,
            "no longer found": c.no_longer_found,
        }
        for c in [*preview.counts, preview.total]
    ]
    changes = [
        {
            "memory type": c.memory_type,
            "action": c.action.value + (" (history)" if c.as_history else ""),
            "memory": c.memory_id,
            "version": c.version,
            "before": c.before or "",
            "after": c.after,
        }
        for c in preview.changes
    ]
    lost = [
        {
            "memory type": m.memory_type,
            "memory": m.memory_id,
            "snapshot": m.snapshot_id,
            "text": m.text,
        }
        for m in preview.no_longer_found
    ]
    plan = preview.plan
    cost = plan.cost.live_usd
    title = f"Replay preview: {len(preview.snapshot_ids)} snapshot(s) of {preview.store}"
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}{STYLE_MORE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p class='period'>{html.escape(versions)}; nothing was written to the store</p>"
        "<h2>What a replay of these snapshots would do</h2>"
        + table(list(counts[0]), counts, "No change.")
        + "<h2>Changes</h2>"
        + table(
            ["memory type", "action", "memory", "version", "before", "after"],
            changes,
            "A replay of these snapshots would change nothing.",
        )
        + "<h2>No longer found</h2>"
        + table(["memory type", "memory", "snapshot", "text"], lost, "Every memory is found again.")
        + "<h2>The full replay</h2>"
        + f"<p>{plan.requests:,} requests, {plan.input_tokens:,} input and "
        f"{plan.output_tokens:,} output tokens expected; "
        + html.escape("unpriced" if cost is None else f"${cost:.4f} live")
        + "</p>"
        + '<script type="application/json" id="mempipe-users">'
        + orjson.dumps(sorted(users)).decode().replace("</", "<\\/")
        + "</script></body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(path.name + ".writing")
    aside.write_text(page, encoding="utf-8")
    aside.replace(path)
    return path.resolve()
