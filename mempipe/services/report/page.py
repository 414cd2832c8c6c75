"""The audit as one page to look at: what a night of reconciliation did, as tables and
Vega-Lite charts in one self-contained HTML file (vega-embed's script, from the vl-convert
package, is inside it: it opens offline; about 0.9 MB).

The page shows memories' text, so it is a file an erase must reach: it carries the figures it
was drawn from (with each memory's owner) in a JSON block, and :func:`redact_page` draws it
again with a user's texts replaced. Prefect's artifacts get the same figures without text."""

from __future__ import annotations

import functools
import heapq
import html
import json
import re
from collections import Counter
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.bundle import REDACTED, BundleSelection
from mempipe.schemas.costs import CostConfig, ModelPrice, SpendRow
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import MEMORY_COLLECTIONS, MemoryRecord
from mempipe.schemas.report import DaySpend
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
    subtitle: str = ""
    by: str = Field(default="applied", description="the audit days: applied or observed")
    actions: list[dict[str, object]]
    failures: list[dict[str, object]]
    reinforced: list[TopMemory]
    updated: list[TopMemory]
    runs: list[dict[str, object]]
    spend: list[DaySpend] = Field(default_factory=list)


def spend_by_day(
    rows: list[SpendRow], prices: dict[str, ModelPrice] | None = None
) -> list[DaySpend]:
    """The runs' spend summed by day, kind, memory type, model and way, priced."""
    summed: dict[tuple[str, str, str, str, str], SpendRow] = {}
    for row in rows:
        key = (row.day, row.kind, row.memory_type, row.model, row.via)
        zero = {"requests": 0, "input_tokens": 0, "output_tokens": 0, "unreported": 0}
        summed.setdefault(key, row.model_copy(update=zero)).add(row)
    table = prices if prices is not None else CostConfig().prices
    return [
        DaySpend(
            **r.model_dump(include={"day", "kind", "memory_type", "model", "via"}),
            requests=r.requests,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            usd=r.cost(table),
        )
        for _, r in sorted(summed.items())
    ]


def gather(
    uow: UnitOfWork,
    frame: pl.LazyFrame | None,
    since: str | None,
    until: str | None,
    by: str = "applied",
    prices: dict[str, ModelPrice] | None = None,
) -> PageFigures:
    """The figures of the audit rows in ``frame`` and of the store's memories, failures and
    runs; the title names the store and the period."""
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
    period = f"{since or 'the first day'} to {until or 'today'}"
    return PageFigures(
        title=f"mempipe audit of {uow.url}, {period}",
        subtitle=f"Audit rows by the day (UTC) the changes were {by}; the runs are the store's "
        "latest 30.",
        by=by,
        actions=actions,
        failures=_failures_by_day(uow, since, until),
        reinforced=[_top(kind, m, m.reinforcement_count) for kind, m in reinforced],
        updated=[_top(kind, m, m.version) for kind, m in updated],
        runs=[_run_row(run) for run in uow.runs.list_runs(limit=30)],
        spend=spend_by_day(uow.runs.spend(since=since, until=until), prices),
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


CHART_WIDTH = 640


def charts(data: PageFigures) -> list[Chart]:
    """The page's charts, in order: each a Vega-Lite spec, or the reason it has nothing to draw."""
    other = "applied" if data.by == "observed" else "observed"
    hint = (
        f"No audit rows in this period by the day they were {data.by}. "
        f"A backfill of old history is dated by when its turns were observed: "
        f"write the page again with --by {other}."
    )
    actions = [{**r, "series": f"{r['memory_type']} {r['action']}"} for r in data.actions]
    return [
        Chart(
            title="Actions per memory type per day",
            spec=_stacked_days(actions, "series", "Memory type and action", "Audit rows"),
            empty=None if actions else hint,
        ),
        Chart(
            title="Failures by class per day",
            spec=_stacked_days(data.failures, "failure_class", "Failure class", "Failures"),
            empty=None if data.failures else "No failures recorded in this period.",
        ),
        Chart(
            title="Most reinforced memories",
            spec=_top_chart(data.reinforced, "Times reinforced"),
            empty=None if data.reinforced else "No memory has been reinforced yet.",
        ),
        Chart(
            title="Most updated memories",
            spec=_top_chart(data.updated, "Version"),
            empty=None if data.updated else "No memory has been updated yet.",
        ),
    ]


class Chart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    spec: dict[str, Any]
    empty: str | None = Field(default=None, description="shown instead of an empty chart")


def _stacked_days(rows: list[dict[str, Any]], series: str, legend: str, measure: str) -> dict:
    import altair as alt

    return (
        alt.Chart(alt.Data(values=rows))
        .mark_bar()
        .encode(
            x=alt.X("day:O", title="Day (UTC)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("sum(count):Q", title=measure, axis=_counts_axis(_largest_day(rows))),
            color=alt.Color(f"{series}:N", title=legend),
            tooltip=["day:O", f"{series}:N", "sum(count):Q"],
        )
        .properties(width=CHART_WIDTH, height=240)
        .to_dict()
    )


def _top_chart(rows: list[TopMemory], measure: str) -> dict:
    """One bar per memory; a redacted one keeps its id, so that two stay two bars."""
    import altair as alt

    largest = max((r.count for r in rows), default=0)
    values = [
        {
            "memory": f"{r.memory_type} {r.memory_id[:8]}: {r.text}"
            if r.text == REDACTED
            else f"{r.memory_type}: {r.text}",
            "count": r.count,
        }
        for r in rows
    ]
    return (
        alt.Chart(alt.Data(values=values))
        .mark_bar()
        .encode(
            x=alt.X("count:Q", title=measure, axis=_counts_axis(largest)),
            y=alt.Y("memory:N", title=None, sort="-x", axis=alt.Axis(labelLimit=420)),
            tooltip=["memory:N", "count:Q"],
        )
        .properties(width=CHART_WIDTH - 300, height=alt.Step(22))
        .to_dict()
    )


def _largest_day(rows: list[dict[str, Any]]) -> int:
    days: Counter[object] = Counter()
    for row in rows:
        days[row["day"]] += int(row["count"])
    return max(days.values(), default=0)


def _counts_axis(largest: int) -> Any:
    """Whole numbers only: a small count gets a tick at each, a large one ticks in whole steps."""
    import altair as alt

    if largest <= 10:
        return alt.Axis(values=list(range(largest + 1)), format="d")
    return alt.Axis(tickMinStep=1, format="d")


def table(columns: list[str], rows: list[dict[str, Any]], empty: str) -> str:
    if not rows:
        return f"<p class='empty'>{html.escape(empty)}</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _totals(data: PageFigures) -> list[dict[str, Any]]:
    counts: Counter[tuple[str, str]] = Counter()
    for row in data.actions:
        counts[(str(row["memory_type"]), str(row["action"]))] += int(row["count"])  # type: ignore[call-overload]
    return [
        {"memory type": kind, "action": action, "rows": n}
        for (kind, action), n in sorted(counts.items())
    ]


@functools.cache
def _vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script, from the vl-convert package (no network)."""
    import vl_convert

    return vl_convert.javascript_bundle()


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em}"
    "th{background:#f3f3f3}.empty{color:#555;font-style:italic}"
    ".period{color:#444}"
)


DATA_BLOCK = re.compile(
    r'<script type="application/json" id="mempipe-figures">(.*?)</script>', re.DOTALL
)


def write_page(data: PageFigures, path: Path) -> Path:
    """One HTML file: the totals and the runs first, then the charts (drawn by vega-embed from
    the script inside the page: it opens offline), then the figures' data (what
    :func:`redact_page` reads back). Written beside the path and moved over it."""
    title = html.escape(data.title)
    drawn = charts(data)
    sections = []
    for index, chart in enumerate(drawn):
        body = (
            f"<p class='empty'>{html.escape(chart.empty)}</p>"
            if chart.empty
            else f"<div id='figure-{index}' class='chart'></div>"
        )
        sections.append(f"<h2>{html.escape(chart.title)}</h2>{body}")
    specs = {f"figure-{i}": c.spec for i, c in enumerate(drawn) if not c.empty}
    embed = (
        f"const specs = {_json(specs)};"
        "for (const [id, spec] of Object.entries(specs))"
        " vegaEmbed('#' + id, spec, {renderer: 'svg', actions: false});"
    )
    runs = ["run", "flow", "status", "started", "counts"]
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{STYLE}</style></head><body>"
        f"<h1>{title}</h1>"
        f"<p class='period'>{html.escape(data.subtitle)}</p>"
        "<h2>Totals</h2>"
        + table(["memory type", "action", "rows"], _totals(data), "No audit rows.")
        + "<h2>Runs</h2>"
        + table(runs, data.runs, "No runs recorded.")
        + "<h2>Spend by day and memory type</h2>"
        + table(
            [
                "day",
                "kind",
                "memory type",
                "model",
                "via",
                "requests",
                "input tokens",
                "output tokens",
                "usd",
            ],
            _spend_rows(data.spend),
            "No provider request recorded in this period (local models spend nothing).",
        )
        + "".join(sections)
        + (f"<script>{_vega_bundle()}</script><script>{embed}</script>" if specs else "")
        + f'<script type="application/json" id="mempipe-figures">{_json(data)}</script>'
        "</body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(path.name + ".writing")
    aside.write_text(page, encoding="utf-8")
    aside.replace(path)
    return path.resolve()


def _spend_rows(spend: list[DaySpend]) -> list[dict[str, Any]]:
    return [
        {
            "day": r.day,
            "kind": r.kind,
            "memory type": r.memory_type or "all types",
            "model": r.model,
            "via": r.via,
            "requests": r.requests,
            "input tokens": r.input_tokens,
            "output tokens": r.output_tokens,
            "usd": "unpriced" if r.usd is None else f"{r.usd:.6f}",
        }
        for r in spend
    ]


def _json(value: BaseModel | dict[str, Any]) -> str:
    """JSON that cannot end the script element it is in."""
    text = value.model_dump_json() if isinstance(value, BaseModel) else json.dumps(value)
    return text.replace("</", "<\\/")


def redact_page(path: Path, selection: BundleSelection, *, dry_run: bool) -> int:
    """The page's memories owned by the user, their text redacted and the page drawn again;
    a page mempipe did not write (no figures block) is an error, named as left by the erase."""
    return redact_page_rows(path, lambda row: row.owned_by(selection), dry_run=dry_run)


def redact_page_rows(path: Path, chosen: Callable[[TopMemory], bool], *, dry_run: bool) -> int:
    """The page's memories ``chosen`` says, their text redacted and the page drawn again (an
    erase's, a user's; a forget's, the memories it forgot)."""
    found = DATA_BLOCK.search(path.read_text(encoding="utf-8"))
    if found is None:
        raise ValueError("no figures block: not a page mempipe wrote")
    data = PageFigures.model_validate_json(found[1].replace("<\\/", "</"))
    owned = [
        row for row in (*data.reinforced, *data.updated) if chosen(row) and row.text != REDACTED
    ]
    if owned and not dry_run:
        for row in owned:
            row.text = REDACTED
        write_page(data, path)
    return len(owned)
