"""Small readers and builders shared by tests."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.archive import ArchiveFormat, IngestRequest
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.summaries import IngestSummary
from mempipe.schemas.transcript import SnapshotContent, TurnLine
from mempipe.services.audit import scan_audit
from mempipe.services.ingest import ingest_file

AIRPORT_SNAPSHOT = SnapshotContent(
    snapshot_id="snap_1",
    org_id="o",
    project_id="p",
    user_id="u",
    session_id="s",
    turns=[TurnLine(role="user", content="My home airport is LIS now.")],
)
"""One user turn with one fact, for an extractor to find."""


def audit_actions(audit_dir: Path) -> Counter:
    """(memory type, action, text) of every audit row, counted: what two runs must agree on."""
    frame = scan_audit(audit_dir).collect()
    return Counter(zip(frame["memory_type"], frame["action"], frame["text"], strict=True))


def semantic_memory(memory_id: str, text: str, user: str, **fields: Any) -> SemanticMemory:
    """A semantic memory of org ``o``, project ``p``, as written on 2024-01-01."""
    at = datetime(2024, 1, 1, tzinfo=UTC)
    return SemanticMemory(
        id=memory_id,
        org_id="o",
        project_id="p",
        user_id=user,
        text=text,
        label=fields.pop("label", memory_id),
        created_at=at,
        updated_at=at,
        **fields,
    )


def ingest(
    store: Any,
    path: Path,
    defaults: IdentityDefaults,
    rejects: Path,
    *,
    format: str = ArchiveFormat.AUTO,
    run_id: str = "r",
    **more: Any,
) -> IngestSummary:
    """One archive file ingested into ``store`` as the backfill's ingest reads it."""
    request = IngestRequest(
        path=path, format=format, defaults=defaults, run_id=run_id, rejects_file=rejects, **more
    )
    return ingest_file(UnitOfWork(store), request)


def noisy_lines(stderr: str) -> str:
    """What a command that succeeded printed on stderr besides its progress bars: nothing is
    expected (no traceback, no exception text, no warning of Prefect's)."""
    return "\n".join(line for line in stderr.splitlines() if line.strip() and "━" not in line)
