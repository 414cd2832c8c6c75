"""Import: a mempipe bundle verbatim, or the long-term memories of another memory system."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field

from mempipe.adapters.llm.registry import ExtractorName
from mempipe.archives.paths import expand_paths
from mempipe.archives.registry import FormatKind, MemoryFormatName, kind_of
from mempipe.bootstrap import AppContext, load_context
from mempipe.domain.run_outcome import first_undone, unread_files, vectors_left
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.flows.recorded_run import concluded, recorded_run
from mempipe.interrupts import handle_stop_signals
from mempipe.rejects import rejects_path
from mempipe.schemas.bundle import (
    BundleImportSummary,
)
from mempipe.schemas.identity import IdentityDefaults, IdentityPolicy
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.memory_import import MemoryImportSummary, MemoryReading
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.run import FileKind
from mempipe.tasks.archives import resolve_archives
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.import_ import check_bundle, import_memory_file, read_bundle
from mempipe.tasks.report import export_audit


class Import(Job[BaseModel]):
    """The request of ``mempipe import``: a bundle (one directory, verbatim) or the memory
    files of another system (reconciled and audited)."""

    creates_store: ClassVar[bool] = True

    paths: Annotated[list[str], Field(min_length=1)]
    format: MemoryFormatName
    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    identity: IdentityPolicy = IdentityPolicy.STRICT
    memory_type: MemoryType | None = None
    verbatim: bool = False
    extractor: ExtractorName = "offline"
    rejects_dir: str = "mempipe-rejects"
    audit_dir: str = "audit"

    def check(self, context: AppContext) -> None:
        if kind_of(self.format) is not FormatKind.BUNDLE:
            expand_paths(self.paths)

    def prepares(self) -> bool:
        """A bundle's flow checks the whole bundle before it prepares (or creates) the store:
        one that differs from its manifest leaves the target as it was."""
        return kind_of(self.format) is not FormatKind.BUNDLE

    def reading(self, defaults: IdentityDefaults, rejects_file: Path) -> MemoryReading:
        """How the run reads every file: this request's format, type and verbatim, with the
        identity and rejects file the run settled."""
        return MemoryReading(
            format=self.format,
            defaults=defaults,
            memory_type=self.memory_type,
            verbatim=self.verbatim,
            rejects_file=rejects_file,
        )

    def run(self, context: AppContext) -> BundleImportSummary | MemoryImportSummary:
        common = context.flow_options()
        if kind_of(self.format) is FormatKind.BUNDLE:
            return import_flow(path=self.paths[0], rejects_dir=self.rejects_dir, **common)
        return import_memories_flow(**self.model_dump(), **common)


@job_flow("import")
def import_flow(
    path: str,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    rejects_dir: str = "mempipe-rejects",
) -> BundleImportSummary:
    """Idempotent: importing the same bundle again writes nothing."""
    context = load_context(store, config, store_secret)
    checked = check_bundle(path)  # the whole bundle, before the store is touched
    with recorded_run(
        context, "import", {"path": path, "format": "bundle"}, creates_store=True
    ) as run:
        rejects = rejects_path(rejects_dir, run.run_id, "import")
        run.record_file(rejects, FileKind.REJECTS)
        summary = read_bundle(context.store_url, path, checked, run.run_id, str(rejects))
        written = {f"written_{c}": n for c, n in summary.written.items()}
        run.end(written | {"conflicts": summary.conflicts})
    publish_table(
        "import",
        [
            {"collection": c, "written": n, "skipped": summary.duplicates_skipped.get(c, 0)}
            for c, n in summary.written.items()
        ],
        f"import {run.run_id}: digests {'match' if summary.digests_match else 'differ'}",
    )
    return summary


@job_flow("import-memories")
def import_memories_flow(
    paths: Annotated[list[str], Field(min_length=1)],
    format: MemoryFormatName,
    org_id: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    identity: IdentityPolicy = IdentityPolicy.STRICT,
    memory_type: MemoryType | None = None,
    verbatim: bool = False,
    extractor: ExtractorName = "offline",
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    rejects_dir: str = "mempipe-rejects",
    audit_dir: str = "audit",
) -> MemoryImportSummary:
    """Bring in the memory files of another system, reconciled and audited as extraction is
    (``verbatim``: as they are); the same files again change nothing. An LLM judges."""
    started = time.monotonic()
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    defaults = context.identity_defaults(org_id, project_id, user_id, agent_id, identity)
    settings, store_url = context.replay_settings(extractor, asking=True), context.store_url
    asked = {"paths": paths, "format": format, **defaults.recorded()}
    asked["audit_dir"] = str(Path(audit_dir).absolute())
    with recorded_run(context, "import-memories", asked, creates_store=True) as run:
        rejects_file = rejects_path(rejects_dir, run.run_id, "import")
        run.record_file(rejects_file, FileKind.REJECTS, defaults.user_id)
        reading = Import.of_run().reading(defaults, rejects_file)
        files = _import_files(store_url, paths, reading, settings, run.run_id)
        summary, failed = _summed(run.run_id, reading, files, started)
        summary.audit_files = export_audit(
            store_url, audit_dir, run_id=run.run_id, mark_exported=True
        )
        run.end(summary.run_counts(), failed)
    _publish(summary)
    return concluded(summary, "import", failed)


def _import_files(
    store_url: str, paths: list[str], reading: MemoryReading, settings: ReplaySettings, run_id: str
) -> list[MemoryImportSummary]:
    """Every file the paths name, one task each, in order."""
    return [
        import_memory_file(store_url, path, reading, settings, run_id)
        for group in resolve_archives(paths)
        for path in group
    ]


def _publish(summary: MemoryImportSummary) -> None:
    publish_table(
        "import-memories",
        [{"count": c, "value": n} for c, n in summary.run_counts().items()],
        f"import {summary.run_id} ({summary.format})",
    )


def _summed(
    run_id: str, reading: MemoryReading, files: list[MemoryImportSummary], started: float
) -> tuple[MemoryImportSummary, str | None]:
    """The files' summaries added up, with what the run left undone: the files it could not
    read, the memories the provider left without a vector."""
    summary = MemoryImportSummary.of_files(run_id, reading.format, files)
    summary.rejects_path = str(reading.rejects_file) if summary.rejected else None
    summary.seconds = round(time.monotonic() - started, 3)
    failed = first_undone(
        unread_files(list(summary.unread.items()), summary.rejects_path),
        vectors_left(summary.provider_failed, summary.provider_error),
    )
    return summary, failed
