"""A retention policy's rules at one instant: pure, so the plan, the run and every read apply
the same cutoffs."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from mempipe.schemas.retention import RETAINED, Expiry, RetentionPolicy


def expiry_of(policy: RetentionPolicy, as_of: datetime) -> Expiry:
    """The policy at ``as_of``: each collection with a ``max_age`` gets its cutoff."""
    cutoffs = {
        collection: as_of - rule.max_age
        for collection in RETAINED
        if (rule := policy.rule(collection)) is not None and rule.max_age is not None
    }
    return Expiry(as_of=as_of, policy=policy, cutoffs=cutoffs)


def as_of_problem(as_of: datetime, now: datetime) -> str | None:
    """Why a run cannot forget as of ``as_of``: a time to come would forget what has not
    expired yet."""
    if as_of > now:
        return (
            f"--as-of {as_of.isoformat()} is later than now ({now.isoformat(timespec='seconds')}):"
            " forgetting what has not expired yet is not a policy; give a time up to now"
        )
    return None


@dataclass(frozen=True)
class Held:
    """One record of one owner as a rule sees it: ``at`` when it was said (a turn) or last
    confirmed (a memory), None when unknown; ``counted``: it takes a place under
    ``max_per_user`` (a pinned memory does not, and is never expired)."""

    key: Hashable
    at: datetime | None
    counted: bool = True


def owner_expired(records: Sequence[Held], collection: str, expiry: Expiry) -> dict[Hashable, str]:
    """Of one (unpinned) owner's records, newest first (an unknown time last), those the
    collection's rule expires, with the rule: older than the cutoff, else past the newest
    ``max_per_user`` of those not older. The SQLite store says the same in SQL
    (``retention_sql``)."""
    rule = expiry.rule(collection)
    if rule is None:
        return {}
    cutoff = expiry.cutoffs.get(collection)
    expired: dict[Hashable, str] = {}
    place = 0
    for record in records:
        if not record.counted:
            continue
        if cutoff is not None and record.at is not None and record.at < cutoff:
            expired[record.key] = f"{collection}.max_age"
            continue
        place += 1
        if rule.max_per_user is not None and place > rule.max_per_user:
            expired[record.key] = f"{collection}.max_per_user"
    return expired


def versions_expired(
    chains: Mapping[Hashable, Sequence[Hashable]],
    heads: Mapping[Hashable, str],
    keep: int | None,
) -> dict[Hashable, str]:
    """Superseded versions that go: all of an expired head's (``heads``: its rule), and past
    the newest ``keep`` of a kept one's. ``chains``: each current version's superseded ones,
    newest first."""
    gone: dict[Hashable, str] = {}
    for head, versions in chains.items():
        if head in heads:
            gone.update(dict.fromkeys(versions, heads[head]))
        elif keep is not None:
            gone.update(dict.fromkeys(versions[keep:], "keep_versions"))
    return gone
