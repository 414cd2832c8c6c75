"""Export a store (or one org, project or user) as a bundle; import a bundle into a store; erase
one user's data; copy a store into another."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

from prefect import flow
from pydantic import Field

from mempipe.bootstrap import load_context
from mempipe.domain.run_outcome import first_undone, unread_files, vectors_left
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.flows.hooks import record_failed_run
from mempipe.flows.recorded_run import concluded, recorded_run
from mempipe.interrupts import handle_stop_signals
from mempipe.rejects import rejects_path
from mempipe.schemas.bundle import (
    BundleImportSummary,
    BundleSelection,
    CopySummary,
    EraseSummary,
    ExportSummary,
)
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.memory_import import MemoryFormat, MemoryImportSummary
from mempipe.schemas.run import FileKind
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.backfill import resolve_archives
from mempipe.tasks.replay import export_audit
from mempipe.tasks.runs import (
    record_written_file,
)
from mempipe.tasks.transfer import (
    copy_records,
    erase_user,
    import_memory_file,
    read_bundle,
    write_bundle,
)


@flow(name="export")
def export_flow(
    out: str,
    org_id: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    with_vectors: bool = False,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> ExportSummary:
    """The store is not changed but for one line saying where the bundle went (it holds users'
    text, so an erase must reach it); no run is recorded."""
    context = load_context(store, config, store_secret)
    selection = BundleSelection(org_id=org_id, project_id=project_id, user_id=user_id)
    record_written_file(context.store_url, out, FileKind.BUNDLE, None, user_id)
    summary = write_bundle(context.store_url, out, selection, with_vectors)
    publish_table(
        "export",
        [
            {"collection": c, "records": n, "digest": summary.digests[c]}
            for c, n in summary.counts.items()
        ],
        f"exported to {summary.out}",
    )
    return summary


@flow(name="import", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def import_flow(
    path: str,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    rejects_dir: str = "mempipe-rejects",
) -> BundleImportSummary:
    """Idempotent: importing the same bundle again writes nothing."""
    context = load_context(store, config, store_secret)
    with recorded_run(
        context, "import", {"path": path, "format": "bundle"}, creates_store=True
    ) as run:
        rejects = rejects_path(rejects_dir, run.run_id, "import")
        run.record_file(rejects, FileKind.REJECTS)
        summary = read_bundle(context.store_url, path, run.run_id, str(rejects))
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


@flow(name="erase", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def erase_flow(
    user_id: str,
    org_id: str | None = None,
    project_id: str | None = None,
    dry_run: bool = False,
    audit_dir: str | None = None,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> EraseSummary:
    """Irreversible unless ``dry_run``; never scheduled. The run record (who, scope, counts,
    when) stays in the store: it holds no content. Every audit folder, rejects file and bundle
    the store recorded is reached (of an audit folder, the files this store wrote), and
    ``audit_dir`` too, whole (it must exist); nothing else. The run fails, naming each, while
    any still holds the user's text."""
    context = load_context(store, config, store_secret)
    selection = BundleSelection(org_id=org_id, project_id=project_id, user_id=user_id)
    if audit_dir is not None and not Path(audit_dir).is_dir():
        raise ConfigError(f"--audit-dir {audit_dir}: no such folder; nothing was erased")
    audit_dirs = [audit_dir] if audit_dir else []
    if dry_run:
        summary = erase_user(context.store_url, selection, dry_run, audit_dirs)
        left = None
    else:
        parameters = selection.model_dump(exclude_none=True)
        with recorded_run(context, "erase", parameters) as run:
            summary = erase_user(context.store_url, selection, dry_run, audit_dirs)
            summary.run_id = run.run_id
            left = _still_holding(summary)
            run.end(summary.counts, left)
    publish_table(
        "erase",
        [{"kind": k, "records": n} for k, n in summary.counts.items()],
        f"{'dry run: would erase' if dry_run else 'erased'} user {user_id}",
    )
    if left:
        raise IncompleteRunError(left, summary)
    return summary


def _still_holding(summary: EraseSummary) -> str | None:
    """The files an erase could not clean: the run is not done while any holds the user."""
    if not summary.left:
        return None
    held = "; ".join(f"{f.path} ({f.left})" for f in summary.left)
    return f"the user's text is still in {len(summary.left)} file(s): {held}"


@flow(name="copy", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def copy_flow(
    to: str,
    to_secret: str | None = None,
    with_vectors: bool = False,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    batch_size: Annotated[int, Field(ge=1, le=100_000)] = 2000,
    rejects_dir: str = "mempipe-rejects",
) -> CopySummary:
    """Resumable: a copy into the same target that was killed goes on after its last committed
    batch. The run is recorded in the target; it fails when the verification does."""
    handle_stop_signals()
    source = load_context(store, config, store_secret)
    target = load_context(to, config, to_secret)
    parameters = {"from": source.store_url}
    with recorded_run(target, "copy", parameters, creates_store=True) as run:
        rejects = rejects_path(rejects_dir, run.run_id, "copy")
        for url in (source.store_url, target.store_url):
            record_written_file(url, str(rejects), FileKind.REJECTS, run.run_id)
        summary = copy_records(
            source.store_url, target.store_url, run.run_id, str(rejects), with_vectors, batch_size
        )
        failed = None if summary.verified else "; ".join(summary.differences)
        run.end(summary.copied, failed)
    publish_table(
        "copy",
        [{"collection": c, "copied": n} for c, n in summary.copied.items()],
        f"copy {run.run_id}: {'verified' if summary.verified else 'NOT verified'}",
    )
    return concluded(summary, "copy", failed and f"the copy differs from its source: {failed}")


@flow(name="import-memories", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def import_memories_flow(
    paths: Annotated[list[str], Field(min_length=1)],
    format: MemoryFormat,
    org_id: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    memory_type: MemoryType | None = None,
    verbatim: bool = False,
    extractor: str = "offline",
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    rejects_dir: str = "mempipe-rejects",
    audit_dir: str = "audit",
) -> MemoryImportSummary:
    """Reconciled and audited as extraction is (``verbatim``: stored as they are); importing
    the same files again changes nothing. The judge of an LLM ``extractor`` decides the
    ambiguous pairs."""
    started = time.monotonic()
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    defaults = context.identity_defaults(org_id, project_id, user_id, agent_id)
    settings = context.replay_settings(extractor)
    parameters = {
        "paths": paths,
        "format": format.value,
        **defaults.model_dump(exclude_none=True),
        "audit_dir": str(Path(audit_dir).absolute()),
    }
    with recorded_run(context, "import-memories", parameters, creates_store=True) as run:
        rejects = rejects_path(rejects_dir, run.run_id, "import")
        run.record_file(rejects, FileKind.REJECTS, defaults.user_id)
        files = [
            import_memory_file(
                context.store_url,
                path,
                format,
                defaults,
                settings,
                run.run_id,
                memory_type,
                verbatim,
                str(rejects),
            )
            for group in resolve_archives(paths)
            for path in group
        ]
        summary = MemoryImportSummary.of_files(run.run_id, format, files)
        summary.rejects_path = str(rejects) if summary.rejected else None
        summary.seconds = round(time.monotonic() - started, 3)
        failed = first_undone(
            unread_files(list(summary.unread.items()), summary.rejects_path),
            vectors_left(summary.provider_failed, summary.provider_error),
        )
        summary.audit_files = export_audit(
            context.store_url, audit_dir, run_id=run.run_id, mark_exported=True
        )
        run.end(summary.run_counts(), failed)
    publish_table(
        "import-memories",
        [{"count": c, "value": n} for c, n in summary.run_counts().items()],
        f"import {run.run_id} ({format.value})",
    )
    return concluded(summary, "import", failed)
