"""Migration 0009 on a store that grew under the old turn key: every turn, snapshot and
extraction state is kept with its id (the text index and vectors still point at them), and
afterwards another user's session with the same id goes in beside the first."""

from __future__ import annotations

from contextlib import closing

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store import open_store
from mempipe.adapters.store.sqlite import migrations as sqlite_migrations
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.migrations import all_migrations
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.promote import promote_sessions
from mempipe.services.reembed.fill import embed_collection
from mempipe.services.search import search
from tests.stores import turn

LAST_OLD = "0008_run_liveness"
SQLITE_STEPS = sqlite_migrations.__name__
TURNS = "SELECT id, user_id, session_id, turn_seq, snapshot_id FROM turns ORDER BY id"
EMBEDDER = HashingEmbedder(16)


def test_an_existing_store_is_migrated_to_the_user_in_the_turn_key(store_url) -> None:
    with closing(open_store(store_url)) as old:
        for migration in all_migrations():
            old.apply_migration(migration)
            if migration.id == LAST_OLD:
                break
        assert old.applied_migrations()[-1] == LAST_OLD
        # today's writes put the speaker's name into the text index, and a model's options
        # into the registry
        for later in ("0015", "0021", "0023", "0024"):
            with old._conn:
                step = next(m for m in all_migrations() if m.id.startswith(later))
                apply = step.step(SQLITE_STEPS)
                assert apply is not None
                apply(old._conn)
        old.load_declarations()
        maya = [turn(seq, "1", f"maya says lisbon {seq}", user="maya") for seq in range(4)]
        assert old.add_turns(maya, "r").inserted == 4
        promote_sessions(UnitOfWork(old), PromotionLimits(), ["semantic"], run_id="r")
        embed_collection(
            UnitOfWork(old), "stm", HashingEmbedder(16), run_id="r", batch_size=10, state="serving"
        )
        before = old._rows("SELECT id, session_id, turn_seq, snapshot_id FROM turns ORDER BY id")
        snapshots = old._rows("SELECT id FROM snapshots")

    with closing(open_store(store_url, migrate=True)) as migrated:
        assert migrated.applied_migrations()[-1] == all_migrations()[-1].id
        after = migrated._rows(
            "SELECT id, session_id, turn_seq, snapshot_id FROM turns ORDER BY id"
        )
        assert after == before
        assert migrated._rows("SELECT id FROM snapshots") == snapshots
        assert migrated._rows("PRAGMA foreign_key_check") == []
        bob = [turn(seq, "1", f"bob says oslo {seq}", user="bob") for seq in range(2)]
        assert migrated.add_turns(bob, "r").inserted == 2
        assert migrated.add_turns(bob, "r").duplicates == 2
        scope = ReadFilter(user_id="maya")
        for mode in (SearchMode.TEXT, SearchMode.SEMANTIC):
            hits = search(UnitOfWork(migrated), lambda _: EMBEDDER, "lisbon", "stm", mode, scope, 5)
            assert hits.hits, f"{mode}: the text index and the vectors still find maya's turns"
