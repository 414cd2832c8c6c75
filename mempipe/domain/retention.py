"""A retention policy's rules at one instant: pure, so the plan, the run and every read apply
the same cutoffs."""

from __future__ import annotations

from datetime import UTC, datetime

from mempipe.schemas.retention import RETAINED, TURNS, Expiry, RetentionPolicy


def expiry_of(policy: RetentionPolicy, as_of: datetime) -> Expiry:
    """The policy at ``as_of``: each collection with a ``max_age`` gets its cutoff."""
    cutoffs = {
        collection: as_of - rule.max_age
        for collection in RETAINED
        if (rule := policy.rule(collection)) is not None and rule.max_age is not None
    }
    return Expiry(as_of=as_of, policy=policy, cutoffs=cutoffs)


def ruled(policy: RetentionPolicy) -> list[str]:
    """The collections a policy forgets in: those with a rule, and every memory type where it
    keeps only so many versions."""
    return [
        collection
        for collection in RETAINED
        if policy.rule(collection) is not None
        or (collection != TURNS and policy.keep_versions is not None)
    ]


def as_of_problem(as_of: datetime, now: datetime) -> str | None:
    """Why a run cannot forget as of ``as_of``: a time to come would forget what has not
    expired yet."""
    if as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    if as_of > now:
        return (
            f"--as-of {as_of.isoformat()} is later than now ({now.isoformat(timespec='seconds')}):"
            " forgetting what has not expired yet is not a policy; give a time up to now"
        )
    return None
