"""The platform's snapshot promotion rule, replayed on the turns' own timestamps.

A session's unpromoted turns become a snapshot when they reach the max message count, or when
the next turn comes more than the idle period after the last one. What is left when the
session's turns run out is promoted too: a historical session is idle. A snapshot is always a
contiguous run: when the next unpromoted turn does not directly follow the last one (a turn in
between was rejected, or was promoted by an earlier run), the run is cut there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import NamedTuple

from mempipe.domain.ids import snapshot_id
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.snapshot import CutReason, Snapshot
from mempipe.schemas.turn import Role

SUMMARY_QUOTE_CHARS = 160
_ROLES = tuple(role.value for role in Role)
"""The roles in the order a summary counts them, as plain text (faster to look up)."""


class TurnStamp(NamedTuple):
    """What promotion needs of a turn: its key, time, role and text (a tuple: one is made for
    every turn promoted)."""

    org_id: str
    project_id: str
    session_id: str
    turn_seq: int
    created_at: datetime | None
    role: str
    content: str
    user_id: str | None = None
    agent_id: str | None = None

    @property
    def session_key(self) -> tuple[str, str, str, str]:
        """One user's session: two users may reuse a session id."""
        return (self.org_id, self.project_id, self.user_id or "", self.session_id)


def cut_snapshots(
    turns: Iterable[TurnStamp],
    limits: PromotionLimits,
    *,
    handlers: Iterable[str] = (),
    run_id: str | None = None,
) -> Iterator[Snapshot]:
    """Snapshots for ``turns``, which must be ordered by session key, then ``turn_seq``.

    Holds at most ``limits.max_messages`` turns at a time, whatever the input's size.
    """
    handler_names = list(handlers)
    run: list[TurnStamp] = []

    def emit(reason: CutReason) -> Snapshot:
        snapshot = build_snapshot(run, reason, handler_names, run_id)
        run.clear()
        return snapshot

    for turn in turns:
        if run:
            last = run[-1]
            if turn.session_key != last.session_key:
                yield emit(CutReason.END_OF_ARCHIVE)
            elif turn.turn_seq != last.turn_seq + 1:
                yield emit(CutReason.DISCONTINUITY)
            elif _idle_between(last, turn, limits):
                yield emit(CutReason.IDLE)
        run.append(turn)
        if len(run) >= limits.max_messages:
            yield emit(CutReason.MAX_MESSAGES)
    if run:
        yield emit(CutReason.END_OF_ARCHIVE)


def _idle_between(last: TurnStamp, nxt: TurnStamp, limits: PromotionLimits) -> bool:
    if last.created_at is None or nxt.created_at is None:
        return False
    return nxt.created_at - last.created_at > limits.idle_period


def build_snapshot(
    turns: list[TurnStamp], reason: CutReason, handlers: list[str], run_id: str | None
) -> Snapshot:
    first, last = turns[0], turns[-1]
    times = [t.created_at for t in turns if t.created_at is not None]
    return Snapshot(
        snapshot_id=snapshot_id(
            first.org_id, first.project_id, first.user_id, first.session_id, first.turn_seq
        ),
        org_id=first.org_id,
        project_id=first.project_id,
        user_id=next((t.user_id for t in turns if t.user_id), None),
        agent_id=next((t.agent_id for t in turns if t.agent_id), None),
        session_id=first.session_id,
        first_turn_seq=first.turn_seq,
        last_turn_seq=last.turn_seq,
        turn_count=len(turns),
        started_at=min(times) if times else None,
        ended_at=max(times) if times else None,
        cut_reason=reason,
        summary=summarize(turns),
        extraction=[{"handler": h} for h in handlers],
        run_id=run_id,
    )


def summarize(turns: list[TurnStamp]) -> str:
    """A short deterministic summary: who spoke how often, and how the run opens."""
    counts: dict[str, int] = {}
    for turn in turns:
        counts[turn.role] = counts.get(turn.role, 0) + 1
    roles = ", ".join(f"{counts[r]} {r}" for r in _ROLES if r in counts)
    opener = next((t for t in turns if t.role == Role.USER and t.content.strip()), None)
    opener = opener or next((t for t in turns if t.content.strip()), None)
    head = f"{len(turns)} turns ({roles})"
    if opener is None:
        return head + "."
    text = " ".join(opener.content.split())
    if len(text) > SUMMARY_QUOTE_CHARS:
        text = text[: SUMMARY_QUOTE_CHARS - 1].rstrip() + "…"
    return f'{head}, opening with {opener.role}: "{text}"'
