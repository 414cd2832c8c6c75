"""The SQLite store's SQL builders, checked without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.configuration import config_from_url


def test_unpromoted_pages_use_keyset_paging_in_key_order() -> None:
    first = sql.unpromoted_page_sql(after_key=False)
    later = sql.unpromoted_page_sql(after_key=True)
    assert "WHERE snapshot_id IS NULL" in first
    key = "org_id, project_id, coalesce(user_id, ''), session_id, turn_seq"
    assert f"({key}) > (?, ?, ?, ?, ?)" in later
    assert first.endswith(f"ORDER BY {key} LIMIT ?")


def test_turn_inserts_never_overwrite_an_existing_key() -> None:
    assert sql.INSERT_TURNS.endswith("ON CONFLICT DO NOTHING"), "the turn key's unique index"
    assert sql.INSERT_TURNS.count("value ->> ") == len(sql.TURN_COLUMNS)


def test_times_are_stored_as_fixed_width_utc_text_so_text_order_is_time_order() -> None:
    plus_two = timezone(timedelta(hours=2))
    early = sql.iso(datetime(2024, 1, 1, 12, 0, tzinfo=plus_two))
    late = sql.iso(datetime(2024, 1, 1, 11, 0, 0, 1, tzinfo=UTC))
    assert early == "2024-01-01T10:00:00.000000+00:00"
    assert early < late
    assert sql.parse_iso(early) == datetime(2024, 1, 1, 10, tzinfo=UTC)


def test_store_urls_name_relative_and_absolute_files() -> None:
    assert str(config_from_url("sqlite:///data/memory.db").path) == "data/memory.db"
    assert str(config_from_url("sqlite:////var/lib/memory.db").path) == "/var/lib/memory.db"
    assert str(config_from_url("memory.db").path) == "memory.db"
