"""The audit as one page to look at: what a night of reconciliation did, drawn with plotly and
written as one self-contained HTML file (the plotting script is inside it: it opens offline).

The page shows memories' text, so it is a file an erase must reach: it carries the figures it
was drawn from (with each memory's owner) in a JSON block, and :func:`redact_page` draws it
again with a user's texts replaced. Prefect's artifacts get the same figures without text."""

from __future__ import annotations

import heapq
import html
import re
from collections import Counter
from datetime import date
from pathlib import Path

import plotly.graph_objects as go
import polars as pl
from pydantic import BaseModel, ConfigDict

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.bundle import REDACTED, BundleSelection
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import MEMORY_COLLECTIONS, MemoryRecord
from mempipe.schemas.run import RunRecord
from mempipe.services.export import records

TOP = 10


class TopMemory(BaseModel):
    """A memory in the page's "most reinforced" or "most updated" chart, with its owner."""

    model_config = ConfigDict(extra="forbid")

    memory_id: str
    memory_type: str
    text: str
    count: int
    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None

    def owned_by(self, selection: BundleSelection) -> bool:
        return self.user_id == selection.user_id and all(
            getattr(selection, field) in (None, getattr(self, field))
            for field in ("org_id", "project_id")
        )

    def artifact_row(self) -> dict[str, object]:
        """What Prefect may hold: ids and the count, not the text."""
        return {"memory_id": self.memory_id, "type": self.memory_type, "count": self.count}


class PageFigures(BaseModel):
    """The figures the page draws."""

    model_config = ConfigDict(extra="forbid")

    title: str = "mempipe audit"
    actions: list[dict[str, object]]
    failures: list[dict[str, object]]
    reinforced: list[TopMemory]
    updated: list[TopMemory]
    runs: list[dict[str, object]]


def gather(
    uow: UnitOfWork,
    frame: pl.LazyFrame | None,
    since: str | None,
    until: str | None,
    title: str = "mempipe audit",
) -> PageFigures:
    actions = (
        frame.group_by("day", "memory_type", "action")
        .agg(pl.len().alias("count"))
        .sort("day", "memory_type", "action")
        .collect()
        .with_columns(pl.col("day").cast(pl.String))
        .to_dicts()
        if frame is not None
        else []
    )
    reinforced, updated = _top_memories(uow)
    return PageFigures(
        title=title,
        actions=actions,
        failures=_failures_by_day(uow, since, until),
        reinforced=[_top(kind, m, m.reinforcement_count) for kind, m in reinforced],
        updated=[_top(kind, m, m.version) for kind, m in updated],
        runs=[_run_row(run) for run in uow.runs.list_runs(limit=30)],
    )


def _top(kind: str, memory: MemoryRecord, count: int) -> TopMemory:
    return TopMemory(
        memory_id=memory.id,
        memory_type=kind,
        text=_short(memory.text),
        count=count,
        org_id=memory.org_id,
        project_id=memory.project_id,
        user_id=memory.user_id,
    )


def _top_memories(
    uow: UnitOfWork,
) -> tuple[list[tuple[str, MemoryRecord]], list[tuple[str, MemoryRecord]]]:
    """The most reinforced current memories and the most updated ones, read in pages."""
    reinforced: list[tuple[int, str, str, MemoryRecord]] = []
    updated: list[tuple[int, str, str, MemoryRecord]] = []
    for kind in MEMORY_COLLECTIONS:
        for memory in records(uow, kind, BundleSelection()):
            if memory.status.value != "active":
                continue
            if memory.reinforcement_count > 0:
                _keep(reinforced, (memory.reinforcement_count, memory.id, kind, memory))
            if memory.version > 1:
                _keep(updated, (memory.version, memory.id, kind, memory))
    return _ranked(reinforced), _ranked(updated)


def _keep(heap: list, item: tuple) -> None:
    if len(heap) < TOP:
        heapq.heappush(heap, item)
    else:
        heapq.heappushpop(heap, item)


def _ranked(heap: list) -> list[tuple[str, MemoryRecord]]:
    return [(kind, m) for _, _, kind, m in sorted(heap, key=lambda i: (-i[0], i[1]))]


def _failures_by_day(uow: UnitOfWork, since: str | None, until: str | None) -> list[dict]:
    counts: Counter[tuple[str, str]] = Counter()
    failure: Failure
    for failure in records(uow, "failures", BundleSelection()):  # type: ignore[assignment]
        day = failure.at.date()
        if (since and day < date.fromisoformat(since)) or (
            until and day > date.fromisoformat(until)
        ):
            continue
        counts[(day.isoformat(), failure.failure_class.value)] += 1
    return [{"day": d, "failure_class": c, "count": n} for (d, c), n in sorted(counts.items())]


def _run_row(run: RunRecord) -> dict[str, object]:
    counts = ", ".join(f"{k} {v}" for k, v in run.counts.items() if v)
    return {
        "run": run.run_id,
        "flow": run.flow,
        "status": run.status.value,
        "started": run.started_at.isoformat(timespec="seconds"),
        "counts": counts,
    }


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def figures(data: PageFigures) -> list[go.Figure]:
    days = {"xaxis": {"type": "category"}}
    actions = go.Figure(
        layout={"title": "Actions per memory type per day", "barmode": "stack", **days}
    )
    for series in sorted({(r["memory_type"], r["action"]) for r in data.actions}):
        rows = [r for r in data.actions if (r["memory_type"], r["action"]) == series]
        actions.add_bar(
            x=[r["day"] for r in rows], y=[r["count"] for r in rows], name=" ".join(series)
        )
    failures = go.Figure(
        layout={"title": "Failures by class over time", "barmode": "stack", **days}
    )
    for kind in ("environmental", "content"):
        rows = [r for r in data.failures if r["failure_class"] == kind]
        failures.add_bar(x=[r["day"] for r in rows], y=[r["count"] for r in rows], name=kind)
    reinforced = _top_chart(data.reinforced, "Most reinforced memories")
    updated = _top_chart(data.updated, "Most updated memories (version)")
    columns = ["run", "flow", "status", "started", "counts"]
    runs = go.Figure(
        go.Table(
            header={"values": columns},
            cells={"values": [[r[c] for r in data.runs] for c in columns]},
        ),
        layout={"title": "Runs"},
    )
    return [actions, failures, reinforced, updated, runs]


def _top_chart(rows: list[TopMemory], title: str) -> go.Figure:
    """One bar per memory; a redacted one keeps its id, so that two stay two bars."""
    labels = [
        f"{r.memory_type} {r.memory_id[:8]}: {r.text}"
        if r.text == REDACTED
        else f"{r.memory_type}: {r.text}"
        for r in rows
    ]
    return go.Figure(
        go.Bar(x=[r.count for r in rows], y=labels, orientation="h"),
        layout={"title": title, "yaxis": {"autorange": "reversed"}},
    )


DATA_BLOCK = re.compile(
    r'<script type="application/json" id="mempipe-figures">(.*?)</script>', re.DOTALL
)


def write_page(data: PageFigures, path: Path) -> Path:
    """One HTML file: plotly's script once, inline, then every figure, then the figures' data
    (what :func:`redact_page` reads back). Written beside the path and moved over it."""
    parts = [
        figure.to_html(full_html=False, include_plotlyjs=index == 0, div_id=f"figure-{index}")
        for index, figure in enumerate(figures(data))
    ]
    title = html.escape(data.title)
    embedded = data.model_dump_json().replace("</", "<\\/")
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title></head><body style='font-family: sans-serif'>"
        f"<h1>{title}</h1>{''.join(parts)}"
        f'<script type="application/json" id="mempipe-figures">{embedded}</script>'
        "</body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(path.name + ".writing")
    aside.write_text(page, encoding="utf-8")
    aside.replace(path)
    return path.resolve()


def redact_page(path: Path, selection: BundleSelection, *, dry_run: bool) -> int:
    """The page's memories owned by the user, their text redacted and the page drawn again;
    a page mempipe did not write (no figures block) is an error, named as left by the erase."""
    found = DATA_BLOCK.search(path.read_text(encoding="utf-8"))
    if found is None:
        raise ValueError("no figures block: not a page mempipe wrote")
    data = PageFigures.model_validate_json(found[1].replace("<\\/", "</"))
    owned = [
        row
        for row in (*data.reinforced, *data.updated)
        if row.owned_by(selection) and row.text != REDACTED
    ]
    if owned and not dry_run:
        for row in owned:
            row.text = REDACTED
        write_page(data, path)
    return len(owned)
