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
