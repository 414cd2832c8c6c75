"""The snapshot promotion rule, on the turns' own timestamps (plain Python, no store)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mempipe.domain.ids import snapshot_id
from mempipe.domain.promotion import TurnStamp, cut_snapshots
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.snapshot import CutReason

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)


def turns(session: str, gaps_minutes: list[float], start_seq: int = 0) -> list[TurnStamp]:
    """Turns of one session; the first at T0, then each after the given gap."""
    out, at = [], T0
    for i, gap in enumerate([0.0, *gaps_minutes]):
        at = at + timedelta(minutes=gap)
        role = "user" if i % 2 == 0 else "assistant"
        out.append(TurnStamp("o", "p", session, start_seq + i, at, role, f"{session} turn {i}"))
    return out


def ranges(snapshots) -> list[tuple[int, int, CutReason]]:
    return [(s.first_turn_seq, s.last_turn_seq, s.cut_reason) for s in snapshots]


LIMITS = PromotionLimits(max_messages=4, idle_period=timedelta(minutes=30))


def test_reaching_the_max_message_count_cuts_a_snapshot() -> None:
    cut = list(cut_snapshots(turns("s", [1, 1, 1]), LIMITS))
    assert ranges(cut) == [(0, 3, CutReason.MAX_MESSAGES)]


def test_a_turn_after_more_than_the_idle_period_starts_a_new_snapshot() -> None:
    cut = list(cut_snapshots(turns("s", [1, 31, 1]), LIMITS))
    assert ranges(cut) == [(0, 1, CutReason.IDLE), (2, 3, CutReason.END_OF_ARCHIVE)]


def test_a_gap_of_exactly_the_idle_period_does_not_cut() -> None:
    cut = list(cut_snapshots(turns("s", [30, 1]), LIMITS))
    assert ranges(cut) == [(0, 2, CutReason.END_OF_ARCHIVE)]


def test_what_is_left_at_the_end_of_the_archive_is_promoted() -> None:
    cut = list(cut_snapshots(turns("s", [1]), LIMITS))
    assert ranges(cut) == [(0, 1, CutReason.END_OF_ARCHIVE)]


def test_a_long_session_yields_a_series_of_contiguous_snapshots() -> None:
    cut = list(cut_snapshots(turns("s", [1] * 9), LIMITS))
    assert ranges(cut) == [
        (0, 3, CutReason.MAX_MESSAGES),
        (4, 7, CutReason.MAX_MESSAGES),
        (8, 9, CutReason.END_OF_ARCHIVE),
    ]
    assert [s.turn_count for s in cut] == [4, 4, 2]


def test_sessions_never_share_a_snapshot() -> None:
    cut = list(cut_snapshots([*turns("a", [1]), *turns("b", [1, 1])], LIMITS))
    assert [(s.session_id, s.first_turn_seq, s.last_turn_seq) for s in cut] == [
        ("a", 0, 1),
        ("b", 0, 2),
    ]


def test_a_missing_turn_cuts_so_every_snapshot_is_contiguous() -> None:
    stamps = turns("s", [1, 1, 1])
    del stamps[1]
    cut = list(cut_snapshots(stamps, LIMITS))
    assert ranges(cut) == [(0, 0, CutReason.DISCONTINUITY), (2, 3, CutReason.END_OF_ARCHIVE)]


def test_turns_without_timestamps_are_cut_by_count_and_end_only() -> None:
    stamps = [TurnStamp("o", "p", "s", i, None, "user", "x") for i in range(6)]
    cut = list(cut_snapshots(stamps, LIMITS))
    assert ranges(cut) == [(0, 3, CutReason.MAX_MESSAGES), (4, 5, CutReason.END_OF_ARCHIVE)]
    assert cut[0].started_at is None


def test_snapshot_ids_are_deterministic_and_carry_times_identity_and_handlers() -> None:
    first = list(cut_snapshots(turns("s", [1, 31]), LIMITS, handlers=["semantic"], run_id="r"))
    again = list(cut_snapshots(turns("s", [1, 31]), LIMITS, handlers=["semantic"], run_id="r"))
    assert [s.snapshot_id for s in first] == [s.snapshot_id for s in again]
    assert first[0].snapshot_id == snapshot_id("o", "p", None, "s", 0)
    assert first[0].started_at == T0
    assert first[0].ended_at == T0 + timedelta(minutes=1)
    assert [e.handler for e in first[0].extraction] == ["semantic"]
    assert first[0].extraction[0].status == "pending"


def test_the_summary_counts_roles_and_quotes_the_opening_user_turn() -> None:
    (snapshot,) = cut_snapshots(turns("s", [1, 1]), LIMITS)
    assert snapshot.summary == '3 turns (2 user, 1 assistant), opening with user: "s turn 0"'


def test_promotion_holds_at_most_max_messages_turns() -> None:
    """Bounded memory: the rule consumes its input lazily, one snapshot at a time."""
    consumed = 0

    def stream():
        nonlocal consumed
        for stamp in turns("s", [1] * 999):
            consumed += 1
            yield stamp

    snapshots = cut_snapshots(stream(), LIMITS)
    next(snapshots)
    assert consumed == LIMITS.max_messages
