"""Erase: one user's data, in the store and in every file the store recorded."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from mempipe.bootstrap import AppContext, load_context, require_store
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.flows.recorded_run import recorded_run
from mempipe.schemas.bundle import (
    BundleSelection,
    EraseSummary,
)
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.erase import erase_user


class Erase(Job[EraseSummary]):
    """The request of ``mempipe erase`` (``yes``: the command asked, or was told not to)."""

    prepares_store: ClassVar[bool] = False
    command_only: ClassVar[frozenset[str]] = frozenset({"yes"})

    user_id: str
    org_id: str | None = None
    project_id: str | None = None
    dry_run: bool = False
    yes: bool = False
    audit_dir: str | None = None

    def check(self, context: AppContext) -> None:
        require_store(context.store_url)

    def run(self, context: AppContext) -> EraseSummary:
        return erase_flow(**self.model_dump(exclude=self.command_only), **context.flow_options())


@job_flow("erase")
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
    ``audit_dir`` too, whole (it must exist), and what previews kept; nothing else. The run
    fails, naming each, while any still holds the user's text."""
    context = load_context(store, config, store_secret)
    selection = BundleSelection(org_id=org_id, project_id=project_id, user_id=user_id)
    if audit_dir is not None and not Path(audit_dir).is_dir():
        raise ConfigError(f"--audit-dir {audit_dir}: no such folder; nothing was erased")
    audit_dirs = [audit_dir] if audit_dir else []
    kept = str(context.kept_answers)
    if dry_run:
        summary = erase_user(context.store_url, selection, dry_run, audit_dirs, kept)
        left = None
    else:
        parameters = selection.model_dump(exclude_none=True)
        with recorded_run(context, "erase", parameters) as run:
            summary = erase_user(context.store_url, selection, dry_run, audit_dirs, kept)
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
