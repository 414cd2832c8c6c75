"""Export a store (or one org, project or user) as a bundle; import a bundle into a store; erase
one user's data; copy a store into another."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

from prefect import flow
from prefect.runtime import flow_run
from pydantic import Field

from mempipe.adapters.llm.registry import require_extractor
from mempipe.bootstrap import load_context
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.flows.hooks import record_failed_run
from mempipe.interrupts import handle_stop_signals, raise_if_stopped
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
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.run import FileKind
from mempipe.settings import load_llm_settings, load_retry_policy
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.backfill import resolve_archives
from mempipe.tasks.replay import export_audit
from mempipe.tasks.runs import (
    prepare_store,
    record_run_end,
    record_run_start,
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
    run_id = str(flow_run.id)
    prepare_store(context.store_url, config)
    record_run_start(context.store_url, run_id, "import", {"path": path, "format": "mempipe"})
    rejects = rejects_path(rejects_dir, run_id, "import")
    record_written_file(context.store_url, str(rejects), FileKind.REJECTS, run_id)
    summary = read_bundle(context.store_url, path, run_id, str(rejects))
    counts = {f"written_{c}": n for c, n in summary.written.items()} | {
        "conflicts": summary.conflicts
    }
    record_run_end(context.store_url, run_id, counts)
    publish_table(
        "import",
        [
            {"collection": c, "written": n, "skipped": summary.duplicates_skipped.get(c, 0)}
            for c, n in summary.written.items()
        ],
        f"import {run_id}: digests {'match' if summary.digests_match else 'differ'}",
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
    the store recorded is reached, and ``audit_dir`` too (it must exist; without it, ./audit
    where there is one). The run fails, naming each, while any still holds the user's text."""
    context = load_context(store, config, store_secret)
    selection = BundleSelection(org_id=org_id, project_id=project_id, user_id=user_id)
    if audit_dir is not None and not Path(audit_dir).is_dir():
        raise ConfigError(f"--audit-dir {audit_dir}: no such folder; nothing was erased")
    found = ["audit"] if Path("audit").is_dir() else []
    audit_dirs = [audit_dir] if audit_dir else found
    run_id = str(flow_run.id)
    if not dry_run:
        prepare_store(context.store_url, config)
        record_run_start(
            context.store_url, run_id, "erase", selection.model_dump(exclude_none=True)
        )
    summary = erase_user(context.store_url, selection, dry_run, audit_dirs)
    summary.run_id = None if dry_run else run_id
    left = (
        f"the user's text is still in {len(summary.left)} file(s): "
        + "; ".join(f"{f.path} ({f.left})" for f in summary.left)
        if summary.left
        else None
    )
    if not dry_run:
        record_run_end(context.store_url, run_id, summary.counts, left)
    publish_table(
        "erase",
        [{"kind": k, "records": n} for k, n in summary.counts.items()],
        f"{'dry run: would erase' if dry_run else 'erased'} user {user_id}",
    )
    if left and not dry_run:
        raise IncompleteRunError(left, summary)
    return summary


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
    run_id = str(flow_run.id)
    prepare_store(target.store_url, config)
    record_run_start(target.store_url, run_id, "copy", {"from": source.store_url})
    rejects = rejects_path(rejects_dir, run_id, "copy")
    for url in (source.store_url, target.store_url):
        record_written_file(url, str(rejects), FileKind.REJECTS, run_id)
    summary = copy_records(
        source.store_url, target.store_url, run_id, str(rejects), with_vectors, batch_size
    )
    failed = None if summary.verified else "; ".join(summary.differences)
    record_run_end(target.store_url, run_id, summary.copied, failed)
    publish_table(
        "copy",
        [{"collection": c, "copied": n} for c, n in summary.copied.items()],
        f"copy {run_id}: {'verified' if summary.verified else 'NOT verified'}",
    )
    raise_if_stopped(summary, "copy")
    if failed:
        raise IncompleteRunError(f"the copy differs from its source: {failed}", summary)
    return summary


COUNTED = (
    "records_read",
    "added",
    "updated",
    "reinforced",
    "duplicates_skipped",
    "rejected",
    "without_vector",
)
"""The counts of a memory import, summed over its files and recorded with its run."""


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
    run_id = str(flow_run.id)
    defaults = context.identity_defaults(org_id, project_id, user_id, agent_id)
    prepare_store(context.store_url, config)
    record_run_start(
        context.store_url,
        run_id,
        "import-memories",
        {"paths": paths, "format": format.value, **defaults.model_dump(exclude_none=True)},
    )
    require_extractor(extractor)
    settings = ReplaySettings(
        extractor=extractor,
        embedding_model=context.config.memory.embedding.model,
        llm=load_llm_settings(),
        thresholds=context.config.memory.reconcile,
        retry=load_retry_policy(),
    )
    rejects = rejects_path(rejects_dir, run_id, "import")
    record_written_file(context.store_url, str(rejects), FileKind.REJECTS, run_id, defaults.user_id)
    files = [
        import_memory_file(
            context.store_url,
            path,
            format,
            defaults,
            settings,
            run_id,
            memory_type,
            verbatim,
            str(rejects),
        )
        for path in resolve_archives(paths)
    ]
    summary = MemoryImportSummary(run_id=run_id, format=format)
    for part in files:
        for count in COUNTED:
            setattr(summary, count, getattr(summary, count) + getattr(part, count))
        summary.failed_files += part.failed_files
    summary.rejects_path = str(rejects) if summary.rejected else None
    summary.seconds = round(time.monotonic() - started, 3)
    failed = (
        f"{len(summary.failed_files)} file(s) could not be read to the end: "
        + ", ".join(summary.failed_files)
        if summary.failed_files
        else None
    )
    summary.audit_files = export_audit(
        context.store_url, audit_dir, run_id=run_id, mark_exported=True
    )
    record_run_end(context.store_url, run_id, {c: getattr(summary, c) for c in COUNTED}, failed)
    publish_table(
        "import-memories",
        [{"count": c, "value": getattr(summary, c)} for c in COUNTED],
        f"import {run_id} ({format.value})",
    )
    raise_if_stopped(summary, "import")
    if failed:
        raise IncompleteRunError(failed, summary)
    return summary
