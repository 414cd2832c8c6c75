"""The metadata partition-key syntax rule.

A key is filterable only when it can be declared as a partition key: each dot-separated segment
matches ``^[a-z][a-z0-9_]{0,63}$``, at most one dot, and none of the reserved names. Other keys
are stored and returned but cannot be filtered on.
"""

from __future__ import annotations

import re

SEGMENT = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
RESERVED = frozenset(
    {
        "org_id",
        "project_id",
        "user_id",
        "agent_id",
        "content",
        "embedding",
        "embedding_model_id",
        "created_at",
    }
)
METADATA_PREFIX = "metadata."


def partition_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a partition key, or None when it can."""
    segments = key.split(".")
    if len(segments) > 2:
        return f"{key!r} has more than one dot"
    for segment in segments:
        if not SEGMENT.match(segment):
            return f"segment {segment!r} of {key!r} does not match {SEGMENT.pattern}"
    if key in RESERVED or segments[0] in RESERVED:
        return f"{key!r} is a reserved name"
    return None


def is_filterable(key: str) -> bool:
    return partition_key_problem(key) is None


def filter_path(key: str) -> str:
    """The qualified path a filter on a metadata key uses (``metadata.engagement_id``)."""
    return f"{METADATA_PREFIX}{key}"
