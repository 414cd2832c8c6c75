"""A retention policy (``memory.retention`` in ``project-config.yaml``) and what ``mempipe
forget`` reports. The policy is opt-in: without one nothing is ever forgotten."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)

from mempipe.schemas.search import STM, collection_of

FORGET_BATCH = 2000
"""Records forgotten per transaction: a kill loses at most one batch's work, never half of one."""
TURNS = "turns"
RETAINED = (TURNS, "semantic", "episodic", "procedural", "taxonomic")
"""What a policy can hold a rule for: the turns, and each built-in memory type."""


def retained_of(source: str) -> str:
    """A search source's collection as a policy names it (turns are ``stm`` to search)."""
    return TURNS if source == STM else collection_of(source)


def source_of(collection: str) -> str:
    """A policy's collection as the registry and search name it."""
    return STM if collection == TURNS else collection


_AGE = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_UNIT = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


def _age(value: Any) -> Any:
    """``90d``, ``12w``, ``36h``; a bare number is refused (days or hours is the whole
    question)."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str) and (match := _AGE.match(value)):
        return int(match[1]) * _UNIT[match[2]]
    raise ValueError(f"{value!r} is not an age: write it as 90d, 12w or 36h")


def _spelled(age: timedelta) -> str:
    if age % timedelta(days=1):
        return f"{int(age / timedelta(hours=1))}h"
    return f"{age.days}d"


Age = Annotated[timedelta, BeforeValidator(_age), PlainSerializer(_spelled, return_type=str)]


class RetentionRule(BaseModel):
    """One collection's rule: older than ``max_age`` goes, and beyond ``max_per_user`` of one
    user, the oldest go first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_age: Age | None = Field(
        default=None,
        description="turns: since they were said; memories: since they were last confirmed "
        "(the latest snapshot that taught or restated them, else their last write)",
    )
    max_per_user: int | None = Field(
        default=None, ge=1, description="the newest this many of a user's are kept"
    )

    @model_validator(mode="after")
    def _something(self) -> RetentionRule:
        if self.max_age is None and self.max_per_user is None:
            raise ValueError("a rule gives max_age, max_per_user or both")
        if self.max_age is not None and self.max_age <= timedelta(0):
            raise ValueError("max_age must be more than nothing")
        return self


class RetentionPolicy(BaseModel):
    """What is forgotten, per collection; pins keep a user, or a memory, whatever the rules
    say."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    turns: RetentionRule | None = None
    semantic: RetentionRule | None = None
    episodic: RetentionRule | None = None
    procedural: RetentionRule | None = None
    taxonomic: RetentionRule | None = None
    keep_versions: int | None = Field(
        default=None,
        ge=0,
        description="superseded versions kept per memory, newest first (none: all kept)",
    )
    pinned_users: tuple[str, ...] = ()
    pinned_memories: tuple[str, ...] = Field(default=(), description="memory ids kept for ever")

    def rule(self, collection: str) -> RetentionRule | None:
        value: RetentionRule | None = getattr(self, collection)
        return value

    @property
    def ruled(self) -> list[str]:
        """The collections it forgets in: those with a rule, and every memory type where it
        keeps only so many versions."""
        return [
            collection
            for collection in RETAINED
            if self.rule(collection) is not None
            or (collection != TURNS and self.keep_versions is not None)
        ]

    @property
    def forgets(self) -> bool:
        """Whether the policy forgets anything at all (an empty one does not)."""
        return bool(self.ruled)


class Expiry(BaseModel):
    """A policy at one instant: each collection's cutoff (older than it is expired) and cap."""

    model_config = ConfigDict(frozen=True)

    as_of: datetime
    policy: RetentionPolicy
    cutoffs: dict[str, datetime] = Field(default_factory=dict)

    def rule(self, collection: str) -> RetentionRule | None:
        return self.policy.rule(collection)


class ForgetCount(BaseModel):
    """What one rule forgets (or would) of one user's collection."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    project_id: str
    user_id: str | None
    collection: str
    rule: str
    records: int


Grouped = tuple[str, str, str | None, str, int]
"""(org, project, user, rule, records): one group of a count, as a store reads it."""


def forget_counts(collection: str, grouped: Iterable[Grouped]) -> list[ForgetCount]:
    return [
        ForgetCount(
            org_id=org,
            project_id=project,
            user_id=user,
            collection=collection,
            rule=rule,
            records=records,
        )
        for org, project, user, rule, records in grouped
    ]


class ForgetSummary(BaseModel):
    """``mempipe forget``: what went (``plan``: what would go), per user, collection and rule."""

    as_of: datetime
    plan: bool = False
    policy: RetentionPolicy | None = None
    counts: list[ForgetCount] = Field(default_factory=list)
    forgotten: int = 0
    files_redacted: int = 0
    run_id: str | None = None
    seconds: float = 0.0

    @property
    def by_rule(self) -> dict[tuple[str, str], int]:
        totals: Counter[tuple[str, str]] = Counter()
        for count in self.counts:
            totals[count.collection, count.rule] += count.records
        return dict(totals)

    @property
    def by_collection(self) -> dict[str, int]:
        totals: Counter[str] = Counter()
        for (collection, _), records in self.by_rule.items():
            totals[collection] += records
        return dict(totals)
