"""The audit as one page to look at: what a night of reconciliation did, drawn with plotly and
written as one self-contained HTML file (the plotting script is inside it: it opens offline)."""

from __future__ import annotations

import heapq
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Protocol

import plotly.graph_objects as go
import polars as pl
from pydantic import BaseModel, ConfigDict

from mempipe.adapters.store.base import RunLog, Transfer
from mempipe.schemas.bundle import MEMORY_COLLECTIONS, BundleSelection
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import MemoryRecord
from mempipe.schemas.run import RunRecord
from mempipe.services.export import records

TOP = 10


class Reportable(Transfer, RunLog, Protocol):
    """What the page reads besides the Parquet audit."""


class PageFigures(BaseModel):
    """The figures the page draws, as plain rows (also published as Prefect artifacts)."""

    model_config = ConfigDict(extra="forbid")

    actions: list[dict[str, object]]
    failures: list[dict[str, object]]
    reinforced: list[dict[str, object]]
    updated: list[dict[str, object]]
    runs: list[dict[str, object]]


def gather(
    store: Reportable, frame: pl.LazyFrame | None, since: str | None, until: str | None
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
    reinforced, updated = _top_memories(store)
    return PageFigures(
        actions=actions,
        failures=_failures_by_day(store, since, until),
        reinforced=[
            {"memory": _short(m.text), "type": kind, "reinforced": m.reinforcement_count}
            for kind, m in reinforced
        ],
        updated=[
            {"memory": _short(m.text), "type": kind, "version": m.version} for kind, m in updated
        ],
        runs=[_run_row(run) for run in store.list_runs(limit=30)],
    )


def _top_memories(
    store: Transfer,
) -> tuple[list[tuple[str, MemoryRecord]], list[tuple[str, MemoryRecord]]]:
    """The most reinforced current memories and the most updated ones, read in pages."""
    reinforced: list[tuple[int, str, str, MemoryRecord]] = []
    updated: list[tuple[int, str, str, MemoryRecord]] = []
    for kind in MEMORY_COLLECTIONS:
        for memory in records(store, kind, BundleSelection()):
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


def _failures_by_day(store: Transfer, since: str | None, until: str | None) -> list[dict]:
    counts: Counter[tuple[str, str]] = Counter()
    failure: Failure
    for failure in records(store, "failures", BundleSelection()):  # type: ignore[assignment]
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
    reinforced = go.Figure(
        go.Bar(
            x=[r["reinforced"] for r in data.reinforced],
            y=[f"{r['type']}: {r['memory']}" for r in data.reinforced],
            orientation="h",
        ),
        layout={"title": "Most reinforced memories", "yaxis": {"autorange": "reversed"}},
    )
    updated = go.Figure(
        go.Bar(
            x=[r["version"] for r in data.updated],
            y=[f"{r['type']}: {r['memory']}" for r in data.updated],
            orientation="h",
        ),
        layout={"title": "Most updated memories (version)", "yaxis": {"autorange": "reversed"}},
    )
    columns = ["run", "flow", "status", "started", "counts"]
    runs = go.Figure(
        go.Table(
            header={"values": columns},
            cells={"values": [[r[c] for r in data.runs] for c in columns]},
        ),
        layout={"title": "Runs"},
    )
    return [actions, failures, reinforced, updated, runs]


def write_page(data: PageFigures, path: Path, title: str) -> Path:
    """One HTML file: plotly's script once, inline, then every figure."""
    parts = [
        figure.to_html(full_html=False, include_plotlyjs=index == 0, div_id=f"figure-{index}")
        for index, figure in enumerate(figures(data))
    ]
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title></head><body style='font-family: sans-serif'>"
        f"<h1>{title}</h1>{''.join(parts)}</body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path.resolve()
