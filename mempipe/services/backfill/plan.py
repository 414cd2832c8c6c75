"""A backfill's plan (`backfill --embed --plan`): what embedding the archives' turns would send."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from mempipe.adapters.llm.tokens import embedding_counter
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.archives.reader import ArchiveReader
from mempipe.domain.spoken import spoken_text
from mempipe.schemas.costs import CostConfig, RunPlan
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.turn import Turn
from mempipe.services.run_plans import PAGE, Tally, count_page, embedding_line, probe_line, run_plan


def backfill_plan(
    uow: UnitOfWork | None,
    store_url: str,
    turn_texts: Iterable[str],
    model_id: str,
    costs: CostConfig,
    llm: LLMSettings,
) -> RunPlan:
    """The archives' turns, embedded by the turns' serving model (the configured one for a new
    store), as ``backfill --embed`` would: every turn read counts, including any the store
    already holds (a backfill skips those, so the figures are an upper bound)."""
    if uow is not None:
        serving = uow.models.active_embedding("stm")
        model_id = serving[0] if serving is not None else model_id
    counter = embedding_counter(model_id)
    tally = Tally()
    page: list[str] = []
    for text in turn_texts:
        page.append(text)
        if len(page) == PAGE:
            count_page(tally, page, model_id, counter)
            page = []
    count_page(tally, page, model_id, counter)
    lines = [probe_line(model_id)]
    if tally.items:
        lines.append(embedding_line("embed stm", model_id, counter, tally))
    return run_plan(
        "backfill",
        store_url,
        "live",
        lines,
        0,
        costs,
        llm,
        ["turns the store already holds are counted, though a backfill skips them"],
    )


def archive_texts(
    paths: Sequence[Path], fmt: str, defaults: IdentityDefaults, columns: dict[str, str]
) -> Iterator[str]:
    """The text each turn of the archives is embedded from, streamed (nothing is kept)."""
    for path in paths:
        for item in ArchiveReader(path, fmt, defaults, columns):
            if isinstance(item, Turn):
                yield spoken_text(item.name, item.content)
