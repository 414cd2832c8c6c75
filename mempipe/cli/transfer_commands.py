"""Moving memory: export a bundle, import one; erase a user."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel

from mempipe.adapters.llm.registry import extractor_names
from mempipe.archives.registry import FormatKind, kind_of, memory_format_names
from mempipe.cli.options import (
    audit_dir_option,
    counted,
    identity_filters,
    identity_options,
    rejects_dir_option,
    renamed,
    store_command,
)
from mempipe.cli.runner import run_job, run_query
from mempipe.schemas.bundle import (
    BundleImportSummary,
    BundleSelection,
    CopySummary,
    EraseSummary,
    ExportSummary,
    UsersReport,
)
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.memory_import import MemoryImportSummary
from mempipe.schemas.retention import FORGET_BATCH, ForgetSummary
from mempipe.schemas.summaries import users_line

if TYPE_CHECKING:
    from mempipe.flows.erase import Erase

OLD_FORMATS = {"mempipe": "bundle"}
"""Old spellings of ``import --format``, kept working with a deprecation line."""


@click.command("export", short_help="Write a bundle of the store, or of one user.")
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False),
    help="The bundle's directory.",
)
@click.option("--org-id", default=None, help="Only this org.")
@click.option("--project-id", default=None, help="Only this project.")
@click.option("--user-id", default=None, help="Only this user (an access request).")
@click.option(
    "--with-vectors",
    is_flag=True,
    default=False,
    help="The serving model's vectors too, one file a collection.",
)
@store_command
def export(**options: Any) -> None:
    """Write a bundle: one Parquet file per collection (turns, snapshots, every memory type
    with every version, audit, failures, runs) and manifest.json with counts and digests."""
    from mempipe.flows.export import Export

    run_job(Export, options, _show_export)


def _show_export(summary: ExportSummary, incomplete: bool) -> None:
    held = counted(summary.counts)
    click.echo(f"exported {held or 'nothing'} to {summary.out} in {summary.seconds:.1f} s")


@click.command("import", short_help="Import a bundle, or another system's memories.")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "format",
    type=click.Choice([*memory_format_names(), *OLD_FORMATS]),
    callback=lambda _ctx, _param, value: renamed("--format", value, OLD_FORMATS),
    required=True,
    help="bundle: a bundle written by `mempipe export` (one directory); mem0: what mem0's "
    "get_all returns or its export; langgraph: LangGraph store items (LangMem values too); "
    "letta: Letta's archival memory passages; memories: mempipe's memory JSONL. (mempipe: the "
    "old name of bundle.)",
)
@identity_options
@click.option(
    "--memory-type",
    type=click.Choice([t.value for t in MemoryType]),
    default=None,
    help="The type of memories that do not say (default semantic; mem0 and LangGraph memories "
    "are text: semantic or episodic).",
)
@click.option(
    "--verbatim",
    is_flag=True,
    default=False,
    help="Store the memories as they are (their ids and times kept) instead of reconciling them.",
)
@click.option(
    "--extractor",
    type=click.Choice(extractor_names()),
    default="offline",
    show_default=True,
    help="openai: its judge decides ambiguous pairs (UPDATE, REINFORCE or ADD).",
)
@audit_dir_option
@rejects_dir_option
@store_command
def import_command(**options: Any) -> None:
    """Import a mempipe bundle verbatim, or the long-term memories of another system (mem0,
    LangGraph, mempipe's memory JSONL: files, directories, globs, gzip / zstd), reconciled
    against what the store holds and audited like extraction."""
    from mempipe.flows.import_ import Import

    paths, bundle = options["paths"], kind_of(options["format"]) is FormatKind.BUNDLE
    if bundle and (len(paths) != 1 or not Path(paths[0]).is_dir()):
        raise click.UsageError("--format bundle takes one bundle directory")
    if bundle and (given := _not_for_bundles(options)):
        raise click.UsageError(
            f"--format bundle imports its records verbatim, with their own identity: "
            f"{', '.join(given)} do(es) not apply"
        )
    run_job(Import, options, _show_import)


MEMORY_IMPORT_ONLY = (
    "org_id",
    "project_id",
    "user_id",
    "agent_id",
    "identity",
    "memory_type",
    "verbatim",
    "extractor",
    "audit_dir",
)
"""The options of an import of memories: a bundle takes none of them."""


def _not_for_bundles(options: dict[str, Any]) -> list[str]:
    from mempipe.flows.import_ import Import

    return [
        f"--{name.replace('_', '-')}"
        for name in MEMORY_IMPORT_ONLY
        if options.get(name) != Import.model_fields[name].default
    ]


def _show_import(summary: BaseModel, incomplete: bool) -> None:
    if isinstance(summary, BundleImportSummary):
        _bundle_lines(summary)
        return
    assert isinstance(summary, MemoryImportSummary)
    click.echo(
        f"read {summary.records_read}: {summary.added} added, {summary.updated} updated, "
        f"{summary.reinforced} reinforced, {summary.duplicates_skipped} already held, "
        f"{summary.rejected} rejected"
        + (f", {summary.skipped_erased} of erased users" if summary.skipped_erased else "")
        + (f", {summary.without_vector} without a vector" if summary.without_vector else "")
    )
    click.echo(users_line(summary.users, "memory", "memories"))
    if summary.rejects_path:
        click.echo(f"rejects: {summary.rejects_path}")


def _bundle_lines(summary: BundleImportSummary) -> None:
    written = counted(summary.written)
    skipped = sum(summary.duplicates_skipped.values())
    click.echo(f"imported {written or 'nothing'}; {skipped} already held")
    click.echo(users_line(summary.users, "record", "records"))
    if summary.conflicts:
        click.echo(f"{summary.conflicts} held with other content, kept: {summary.rejects_path}")
    if summary.without_vector:
        click.echo(
            f"{summary.without_vector} memories without a vector: "
            "`mempipe reembed --incremental` embeds them"
        )
    verdict = "match" if summary.digests_match else "differ"
    click.echo(f"digests {verdict}" + "".join(f"\n  {d}" for d in summary.digest_differences))


@click.command("erase", short_help="Erase one user's data (a data request).")
@click.option("--user-id", required=True, help="The user whose data goes.")
@click.option("--org-id", default=None, help="Only within this org.")
@click.option("--project-id", default=None, help="Only within this project.")
@click.option("--dry-run", is_flag=True, default=False, help="Count what would go; change nothing.")
@click.option("--yes", is_flag=True, default=False, help="Do not ask for confirmation.")
@click.option(
    "--audit-dir",
    default=None,
    help="An audit folder to redact whole, besides the files the store recorded as its own "
    "(it must exist).",
)
@store_command
def erase(**options: Any) -> None:
    """Erase one user's data (a data request): turns, snapshots, private memories in every
    version with their vectors and text-index entries; the user's audit text redacted. Org-wide
    shared memories stay."""
    from mempipe.flows.erase import Erase

    run_job(Erase, options, _show_erase, ask=_confirm_erase)


def _confirm_erase(request: Erase, store_url: str) -> None:
    if not request.dry_run and not request.yes:
        click.confirm(
            f"Erase every record of user {request.user_id!r} in {store_url}? This cannot be undone",
            abort=True,
            err=True,
        )


def _show_erase(summary: EraseSummary, incomplete: bool) -> None:
    verb = "would erase" if summary.dry_run else "erased"
    gone = counted(summary.counts) or "nothing"
    click.echo(f"{verb} {gone}")
    redact = "would redact" if summary.dry_run else "redacted"
    for file in summary.files:
        if file.left is None:
            click.echo(f"{redact} {file.rows} {file.kind} row(s) in {file.path}")
        else:
            click.echo(f"left: {file.rows} {file.kind} row(s) in {file.path}: {file.left}")
    if summary.left and not summary.dry_run:
        click.echo("next: deal with each file left, then run the same erase again")


@click.command("forget", short_help="Forget what the retention policy expires.")
@click.option(
    "--as-of",
    type=click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]),
    default=None,
    help="Apply the policy as of this time (UTC unless it says; never later than now).",
)
@click.option(
    "--plan",
    is_flag=True,
    default=False,
    help="Write nothing; print what would be forgotten, per collection, rule and user.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=FORGET_BATCH,
    show_default=True,
    help="Records forgotten per transaction (a kill loses at most one batch's work).",
)
@store_command
def forget(**options: Any) -> None:
    """Forget what the project's retention policy (memory.retention in project-config.yaml)
    expires: turns after extraction, memories no longer confirmed, more than a user's share,
    old versions; pinned users and memories stay. Each record goes with its vectors and
    text-index entries and leaves a FORGET audit row (no text). --plan counts it first."""
    from mempipe.flows.forget import Forget

    run_job(Forget, options, _show_forget)


def _show_forget(summary: ForgetSummary, incomplete: bool) -> None:
    if summary.policy is None:
        click.echo(
            "no retention policy (memory.retention in project-config.yaml): nothing forgotten"
        )
        return
    verb = "would forget" if summary.plan else "forgot"
    click.echo(f"{verb} {summary.forgotten} record(s) as of {summary.as_of.isoformat()}")
    for (collection, rule), records in summary.by_rule.items():
        click.echo(f"  {collection:<10} {rule:<24} {records:>8}")
    if summary.plan and summary.counts:
        click.echo("by user:")
        for c in summary.counts:
            click.echo(
                f"  {c.user_id or '(none)':<20} {c.collection:<10} {c.rule:<24} {c.records:>8}"
            )
    if summary.files_redacted:
        click.echo(f"redacted {summary.files_redacted} audit file row(s) of forgotten memories")


@click.command("users", short_help="List the store's users, and those erased.")
@identity_filters
@store_command
def users(**options: Any) -> None:
    """List the store's users (org, project, user) with their turns, memories, and first and
    last record times, and the users erased from it: how to check a data request's id."""
    from mempipe.services.erase import list_users

    options.pop("agent_id")
    keys = ("org_id", "project_id", "user_id")
    selection = BundleSelection(**{key: options.pop(key) for key in keys})
    run_query(list_users, {**options, "selection": selection}, _show_users)


def _show_users(report: UsersReport) -> None:
    rows = [("org", "project", "user", "turns", "memories", "first seen", "last seen")]
    rows += [
        (
            u.org_id,
            u.project_id,
            u.user_id or "(none)",
            f"{u.turns:,}",
            f"{u.memories:,}",
            _day(u.first_seen),
            _day(u.last_seen),
        )
        for u in report.users
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(
            "  ".join(
                cell.rjust(w) if 3 <= i <= 4 else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    click.echo(f"{len(report.users)} user(s) in {report.store}")
    for owner in report.erased:
        click.echo(f"erased: {owner.user_id}" + _scope_text(owner))


def _day(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else "-"


def _scope_text(owner: BundleSelection) -> str:
    scope = [f"{k} {v}" for k, v in (("org", owner.org_id), ("project", owner.project_id)) if v]
    return f" ({', '.join(scope)})" if scope else " (every org and project)"


@click.command("copy", short_help="Copy every record into another store.")
@click.option("--to", "to", required=True, help="The target store's URL.")
@click.option(
    "--to-secret",
    default=None,
    metavar="NAME",
    help="A Prefect Secret block holding the target's URL, or the password of the user --to names.",
)
@click.option(
    "--with-vectors",
    is_flag=True,
    default=False,
    help="The serving models' vectors too, where the target serves the same model (or none).",
)
@click.option(
    "--batch-size",
    default=2000,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Records read from the source and written to the target per batch (one checkpoint).",
)
@rejects_dir_option
@store_command
def copy(**options: Any) -> None:
    """Copy every record of the store (--store) into another (--to), batch by batch; a copy
    that was killed goes on where it stopped; verified by counts and digests at the end."""
    from mempipe.flows.copy import Copy

    run_job(Copy, options, _show_copy)


def _show_copy(summary: CopySummary, incomplete: bool) -> None:
    copied = counted(summary.copied) or "nothing new"
    click.echo(f"copied {copied} to {summary.target} in {summary.seconds:.1f} s")
    click.echo("verified: every collection's count and digest agree")
