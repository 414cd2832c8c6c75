"""A data request's erase: the user's records go from the store, and the user's text from every
file mempipe wrote outside it: the Parquet audit folders, rejects files and HTML report pages
the store recorded (and any audit folder named), redacted in place; the provider answers and
preview pages previews kept, removed; bundles, which are copies
of the store, are named as left until deleted or exported again. The audit keeps its rows, so
it still counts what happened. An erase that leaves the user's text anywhere says where, and
fails.

Nothing else is reached: in a recorded audit folder, only the files this store wrote (their
Parquet metadata names it; a file from before that mark, one of its own runs), so two stores
sharing a folder, or a copy and its source, never redact each other's files. A folder named
(``--audit-dir``) is the user's explicit word and is redacted whole."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mempipe.adapters.llm.kept import forget_user, kept_files
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.errors import ConfigError
from mempipe.schemas.bundle import (
    REDACTED,
    BundleSelection,
    ErasedFile,
    EraseSummary,
    UsersReport,
)
from mempipe.schemas.run import FileKind
from mempipe.services.report.audit import STORE_KEY
from mempipe.services.report.page import redact_page
from mempipe.services.written_files import redact_parquet_text


def erase_user(
    uow: UnitOfWork,
    selection: BundleSelection,
    *,
    dry_run: bool,
    audit_dirs: Sequence[Path] = (),
    kept_answers: Path | None = None,
) -> EraseSummary:
    """``kept_answers``: the folder of provider answers (and preview pages) previews kept. A
    user the store holds nothing of, never erased and named by no file, is refused."""
    started = time.perf_counter()
    require_known_user(uow, selection)
    counts = uow.erasure.erase_user(selection, dry_run=dry_run)
    if kept_answers is not None and selection.user_id is not None:
        kept = (kept_files if dry_run else forget_user)(kept_answers, selection.user_id)
        if kept:
            counts["kept_answers"] = kept
    own = _own_audit_file(uow)
    named = {folder.absolute() for folder in audit_dirs}
    files = [
        found
        for path, kind, owner in _targets(uow, audit_dirs)
        if (
            found := _erase_file(
                path, kind, owner, selection, dry_run=dry_run, own=None if path in named else own
            )
        )
        is not None
    ]
    audit = [f for f in files if f.kind == FileKind.AUDIT.value]
    return EraseSummary(
        selection=selection,
        dry_run=dry_run,
        counts=counts,
        audit_files=sum(f.parts for f in audit),
        audit_file_rows=sum(f.rows for f in audit),
        files=files,
        seconds=round(time.perf_counter() - started, 3),
    )


def list_users(uow: UnitOfWork, selection: BundleSelection) -> UsersReport:
    """``mempipe users``: who the store holds records of, and who was erased from it."""
    return UsersReport(
        store=uow.url,
        selection=selection,
        users=uow.erasure.stored_users(selection),
        erased=uow.erasure.erased_owners(selection),
    )


def require_known_user(uow: UnitOfWork, selection: BundleSelection) -> None:
    """An erase names a user the store holds records of, erased before (a rerun reaches the
    files the first left), or that a file mempipe wrote was recorded for; else it is a typo
    (or the wrong org), refused with the nearest ids the store holds."""
    if (
        uow.erasure.stored_users(selection)
        or uow.erasure.erased_owners(selection)
        or any(f.user_id == selection.user_id for f in uow.files.written_files())
    ):
        return
    scope = selection.model_copy(update={"user_id": None})
    held = sorted({u.user_id for u in uow.erasure.stored_users(scope) if u.user_id})
    where = " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in scope.model_dump().items() if v is not None
    )
    near = nearest(selection.user_id or "", held)
    raise ConfigError(
        f"no user {selection.user_id!r} in {uow.url}{' within ' + where if where else ''}: "
        "nothing was erased; "
        + (f"the nearest it holds: {', '.join(near)}" if near else "it holds no user there")
        + " (`mempipe users` lists them)"
    )


def nearest(name: str, names: Sequence[str], n: int = 3) -> list[str]:
    """The ``n`` names most like ``name``, closest first."""
    return sorted(names, key=lambda held: -SequenceMatcher(None, name, held).ratio())[:n]


def _targets(
    uow: UnitOfWork, audit_dirs: Sequence[Path]
) -> list[tuple[Path, FileKind, str | None]]:
    """Every recorded path, and the audit folders named, once each."""
    targets: dict[Path, tuple[FileKind, str | None]] = {
        Path(f.path): (f.kind, f.user_id) for f in uow.files.written_files()
    }
    for folder in audit_dirs:
        targets.setdefault(folder.absolute(), (FileKind.AUDIT, None))
    return [(path, kind, owner) for path, (kind, owner) in sorted(targets.items())]


def _own_audit_file(uow: UnitOfWork) -> Callable[[Path], bool]:
    """Whether an audit file is this store's: marked with its id, or, unmarked (written before
    the mark), named after one of its runs."""
    store_id = uow.files.store_id().encode()

    def own(path: Path) -> bool:
        marked = (pq.read_schema(path).metadata or {}).get(STORE_KEY)
        if marked is not None:
            return marked == store_id
        return uow.runs.get_run(path.stem.removeprefix("run-")) is not None

    return own


def _erase_file(
    path: Path,
    kind: FileKind,
    owner: str | None,
    selection: BundleSelection,
    *,
    dry_run: bool,
    own: Callable[[Path], bool] | None,
) -> ErasedFile | None:
    """The file's part in the erase; None when it holds nothing of the user (or is gone).
    ``own``: which files of an audit folder are the store's (None: all of them)."""
    if not path.exists():
        return None
    parts, left = 1, None
    try:
        if kind is FileKind.AUDIT:
            parts, rows = redact_audit_files(path, selection, dry_run=dry_run, own=own)
        elif kind is FileKind.REJECTS:
            rows = redact_rejects(path, selection, owner, dry_run=dry_run)
        elif kind is FileKind.REPORT:
            rows = redact_page(path, selection, dry_run=dry_run)
        else:
            rows = _bundle_rows(path, selection)
            left = "a bundle is a copy of the store: delete it, or export it again"
    except (OSError, pa.ArrowException, ValueError) as exc:
        return ErasedFile(path=str(path), kind=kind.value, rows=0, left=f"cannot be read: {exc}")
    if not rows:
        return None
    return ErasedFile(path=str(path), kind=kind.value, rows=rows, parts=parts, left=left)


def redact_audit_files(
    audit_dir: Path,
    selection: BundleSelection,
    *,
    dry_run: bool,
    own: Callable[[Path], bool] | None = None,
) -> tuple[int, int]:
    """Files and rows of the Parquet audit that hold the user's text (of the files ``own``
    accepts), redacted in place."""
    return redact_parquet_text(
        audit_dir, lambda table: _owned(table, selection), dry_run=dry_run, own=own
    )


def redact_rejects(
    path: Path, selection: BundleSelection, owner: str | None, *, dry_run: bool
) -> int:
    """Lines of a rejects file that are the user's: every line of a run whose default user
    they are, else the lines whose raw record names them. Their raw text is redacted; where
    and why stay."""
    lines = path.read_bytes().splitlines(keepends=True)
    kept: list[bytes] = []
    owned = 0
    for line in lines:
        reject = orjson.loads(line)
        raw = reject.get("raw")
        if raw != REDACTED and (owner == selection.user_id or _names_user(raw, selection.user_id)):
            owned += 1
            reject["raw"] = REDACTED
            line = orjson.dumps(reject) + b"\n"
        kept.append(line)
    if owned and not dry_run:
        aside = path.with_name(path.name + ".erasing")
        aside.write_bytes(b"".join(kept))
        os.replace(aside, path)
    return owned


def _names_user(raw: object, user_id: str | None) -> bool:
    if not isinstance(raw, str) or user_id is None:
        return False
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return f'"{user_id}"' in raw
    return isinstance(record, dict) and record.get("user_id") == user_id


def _bundle_rows(bundle: Path, selection: BundleSelection) -> int:
    rows = 0
    for path in sorted(bundle.glob("*.parquet")):
        table = pq.read_table(path, partitioning=None)
        if "user_id" in table.column_names:
            rows += pc.sum(_owned(table, selection)).as_py() or 0
    return rows


def _owned(table: pa.Table, selection: BundleSelection) -> pa.ChunkedArray:
    mask = pc.equal(table.column("user_id"), selection.user_id)
    for field in ("org_id", "project_id"):
        value = getattr(selection, field)
        if value is not None and field in table.column_names:
            mask = pc.and_(mask, pc.equal(table.column(field), value))
    return pc.fill_null(mask, False)
