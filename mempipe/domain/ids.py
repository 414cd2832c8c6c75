"""Deterministic identifiers: the same input always yields the same id, so re-runs and
duplicated tasks write nothing new."""

from __future__ import annotations

import hashlib

_SEP = "\x1f"


def stable_id(prefix: str, *parts: object) -> str:
    digest = hashlib.sha256(_SEP.join("" if p is None else str(p) for p in parts).encode())
    return f"{prefix}_{digest.hexdigest()[:24]}"


def snapshot_id(
    org_id: str, project_id: str, user_id: str | None, session_id: str, first_turn_seq: int
) -> str:
    return stable_id("snap", org_id, project_id, user_id or "", session_id, first_turn_seq)


REF_SEPARATOR = "\x1f"


def turn_ref(
    org_id: str, project_id: str, user_id: str | None, session_id: str, turn_seq: int
) -> str:
    """A turn's key as one text, to name its vector in a bundle: turns have no id of their own
    that travels between stores."""
    return REF_SEPARATOR.join((org_id, project_id, user_id or "", session_id, str(turn_seq)))


def turn_key_of(ref: str) -> tuple[str, str, str, str, int]:
    org_id, project_id, user_id, session_id, seq = ref.split(REF_SEPARATOR)
    return org_id, project_id, user_id, session_id, int(seq)
