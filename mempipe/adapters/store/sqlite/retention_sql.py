"""What a retention policy expires, as one SQL query per collection: the plan counts it, the run
forgets it, and a search leaves it out, so the three never disagree.

A record is expired by its collection's age (older than the cutoff) or cap (past the newest
``max_per_user`` of its owner that are not expired by age, so forgetting the old ones moves no
other record past the cap); a pinned user's records and a pinned memory never are. A turn is
expired only once its snapshot is extracted by every handler that has an extraction state for
it. A memory's superseded versions go with it, and beyond ``keep_versions`` of a kept one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mempipe.adapters.store.sqlite import memory_sql, sql
from mempipe.schemas.retention import TURNS, Expiry

EXTRACTED = (
    "r.snapshot_id IS NOT NULL "
    "AND EXISTS (SELECT 1 FROM snapshot_extractions e WHERE e.snapshot_id = r.snapshot_id) "
    "AND NOT EXISTS (SELECT 1 FROM snapshot_extractions e "
    "WHERE e.snapshot_id = r.snapshot_id AND e.status != 'done')"
)
"""A turn's snapshot has been extracted: a turn not yet extracted is never forgotten."""

CONFIRMED = (
    "coalesce((SELECT max(coalesce(s.ended_at, s.started_at, s.created_at)) "
    "FROM json_each(r.evidence) j JOIN snapshots s ON s.id = j.value), r.updated_at)"
)
"""When a memory was last confirmed: the latest snapshot that taught or restated it (a replay
of last year's archive confirms nothing today), else its last write."""


def table_of(collection: str) -> str:
    return "turns" if collection == TURNS else memory_sql.table(collection)


def key_of(collection: str) -> str:
    """A record's id as a search hit gives it (alias ``r``): a turn's is its place in its
    session."""
    return "r.session_id || '#' || r.turn_seq" if collection == TURNS else "r.id"


def _marks(values: Sequence[Any]) -> str:
    """Placeholders of an ``IN (...)`` list; SQLite takes an empty one (nothing is in it)."""
    return ", ".join("?" for _ in values)


def _of_owners(column: str, owners: Sequence[str | None]) -> tuple[str, list[str]]:
    """`` AND`` the record is one of ``owners``' (None: a record without a user)."""
    named = [o for o in owners if o is not None]
    unnamed = f" OR {column} IS NULL" if None in owners else ""
    return f" AND ({column} IN ({_marks(named)}){unnamed})", named


def _ranked(
    collection: str, expiry: Expiry, owners: Sequence[str | None] | None
) -> tuple[str, list]:
    """Every candidate row with ``aged`` (older than the cutoff) and ``place`` (its rank among
    its owner's records not aged, newest first)."""
    rule = expiry.rule(collection)
    cutoff = expiry.cutoffs.get(collection)
    pinned = list(expiry.policy.pinned_users)
    table = table_of(collection)
    if collection == TURNS:
        when, own = "r.created_at", ""
    else:
        when = CONFIRMED
        own = f" AND r.status = 'active' AND r.id NOT IN ({_marks(expiry.policy.pinned_memories)})"
    values: list[Any] = []
    aged = "0"
    if cutoff is not None:
        aged, values = f"coalesce({when} < ?, 0)", [sql.iso(cutoff)]
    place = "0"
    if rule is not None and rule.max_per_user is not None:
        place = (
            "row_number() OVER (PARTITION BY r.org_id, r.project_id, r.user_id, "
            f"{aged} ORDER BY {when} DESC, r.rowid DESC)"
        )
        values = [*values, *values]
    where = f"coalesce(r.user_id, '') NOT IN ({_marks(pinned)}){own}"
    values += [*pinned, *(() if collection == TURNS else expiry.policy.pinned_memories)]
    if owners is not None:
        scope, named = _of_owners("r.user_id", owners)
        where, values = where + scope, [*values, *named]
    return (
        f"SELECT r.rowid AS rowid, {aged} AS aged, {place} AS place FROM {table} r WHERE {where}",
        values,
    )


def expired_sql(
    collection: str, expiry: Expiry, owners: Sequence[str | None] | None = None
) -> tuple[str, list[Any]] | None:
    """``SELECT rowid, rule`` of every record of ``collection`` the policy expires (``owners``:
    of those users only, each still ranked among all of their own); None where the policy
    expires nothing there."""
    if collection not in expiry.policy.ruled:
        return None
    rule = expiry.rule(collection)
    keep = expiry.policy.keep_versions
    parts, values = [], []
    if rule is not None:
        ranked, values = _ranked(collection, expiry, owners)
        cap = rule.max_per_user
        reason = (
            f"CASE WHEN x.aged THEN '{collection}.max_age' ELSE '{collection}.max_per_user' END"
        )
        gone = "x.aged" + (" OR x.place > ?" if cap is not None else "")
        values += [cap] if cap is not None else []
        parts.append(f"SELECT x.rowid, {reason} AS rule FROM ({ranked}) x WHERE {gone}")
    if collection == TURNS:
        assert parts  # turns have no versions: a rule was given
        return (
            f"SELECT g.rowid, g.rule FROM ({parts[0]}) g JOIN turns r ON r.id = g.rowid "
            f"WHERE {EXTRACTED}",
            values,
        )
    return _with_versions(collection, expiry, parts, values, keep, owners)


def _with_versions(
    collection: str,
    expiry: Expiry,
    heads: list[str],
    values: list[Any],
    keep: int | None,
    owners: Sequence[str | None] | None,
) -> tuple[str, list[Any]]:
    """The expired heads, their superseded versions (the head's rule), and the versions past
    ``keep`` of the heads kept (``keep_versions``)."""
    table = table_of(collection)
    pinned = list(expiry.policy.pinned_memories)
    gone = heads[0] if heads else "SELECT NULL AS rowid, NULL AS rule WHERE 0"
    scope, named = _of_owners("h.user_id", owners) if owners is not None else ("", [])
    pinned_users = list(expiry.policy.pinned_users)
    chain = (
        f"WITH RECURSIVE gone(rowid, rule) AS ({gone}), "
        "chain(rowid, supersedes_id, depth, rule) AS ("
        f"SELECT h.rowid, h.supersedes_id, 0, gone.rule FROM {table} h "
        "LEFT JOIN gone ON gone.rowid = h.rowid WHERE h.status = 'active' "
        f"AND coalesce(h.user_id, '') NOT IN ({_marks(pinned_users)}){scope} "
        f"UNION ALL SELECT m.rowid, m.supersedes_id, c.depth + 1, c.rule FROM chain c "
        f"JOIN {table} m ON m.id = c.supersedes_id AND m.status = 'superseded') "
    )
    values = [*values, *pinned_users, *named]
    kept = "c.depth > ?" if keep is not None else "0"
    values += [keep] if keep is not None else []
    return (
        f"{chain}SELECT c.rowid, coalesce(c.rule, 'keep_versions') AS rule FROM chain c "
        f"JOIN {table} r ON r.rowid = c.rowid WHERE (c.rule IS NOT NULL OR {kept}) "
        f"AND r.id NOT IN ({_marks(pinned)})",
        [*values, *pinned],
    )
