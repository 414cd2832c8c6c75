"""Rejects a backend makes of turns it refuses, in the one shape the rejects file takes."""

from __future__ import annotations

from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import Turn


def turn_reject(turn: Turn, reason: str) -> Reject:
    """A turn a store refused, with where it was read from, for the rejects file."""
    return Reject(
        **turn.source.model_dump(), reason=reason, raw=turn.model_dump_json(exclude={"source"})
    )


def conflict_reject(turn: Turn, path: str, line: int | None, index: int | None) -> Reject:
    """A turn whose key is stored with other content (read from ``path`` at ``line`` or
    ``index``): a reject, never a silent duplicate."""
    where = f"{path}:{line}" if line is not None else f"{path}[{index}]"
    return turn_reject(
        turn,
        f"conflict: turn {turn.turn_seq} of session {turn.session_id!r} is already stored with "
        f"different content (from {where})",
    )
