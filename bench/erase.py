"""What an erase costs to leave nothing of the user on disk, on real text.

    python bench/erase.py [--turns 39524] [--per-user 500]

Loads the LongMemEval development set's turns (``../shared/data/longmemeval-dev/``) into a SQLite
store, each user's history cut into users of ``--per-user`` turns, then on two copies of that
store file:

* the erase of one user (the store's erase role: the deletes, the fence, then the purge that
  merges the text indexes, zeroes the freed pages and truncates the WAL);
* reference: the purge alone (the FTS5 ``optimize`` of every text index and the checkpoint) on
  the untouched copy: what leaving no trace adds to the deletes.

Then searches the erased copy's bytes for the user's turn texts that no other user's turn holds
(LongMemEval's histories share sessions): a check, not a timing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from search import load_turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=39_524)
    parser.add_argument("--per-user", type=int, default=500)
    args = parser.parse_args()

    from mempipe.adapters.store import open_store
    from mempipe.schemas.bundle import BundleSelection

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        built = work / "built.db"
        load_turns(built, work, args.turns, args.per_user).close()
        erased, purged = work / "erased.db", work / "purged.db"
        shutil.copy(built, erased)
        shutil.copy(built, purged)
        size = built.stat().st_size

        store = open_store(f"sqlite:///{erased}")
        (user, count), *_ = store._rows(
            "SELECT user_id, count(*) FROM turns GROUP BY user_id ORDER BY count(*) DESC LIMIT 1"
        )
        texts = [t for (t,) in store._rows("SELECT content FROM turns WHERE user_id = ?", (user,))]
        started = time.perf_counter()
        store.erase_user(BundleSelection(user_id=user), dry_run=False)
        erase_s = time.perf_counter() - started
        store.close()

        reference = open_store(f"sqlite:///{purged}")
        started = time.perf_counter()
        reference._purge(
            [
                name
                for (name,) in reference._rows(
                    "SELECT name FROM sqlite_master WHERE sql LIKE '%USING fts5%'"
                )
            ]
        )
        purge_s = time.perf_counter() - started
        reference.close()

        after = open_store(f"sqlite:///{erased}")
        kept = {t for (t,) in after._rows("SELECT content FROM turns")}
        after.close()
        raw = erased.read_bytes()
        own = [text for text in texts if text not in kept and len(text) > 20]
        left = sum(1 for text in own if text.encode() in raw)
    print(f"store: {args.turns:,} turns, {size / 1e6:.0f} MB; erased user {user}: {count} turns")
    print(f"erase (deletes + fence + purge): {erase_s:.2f} s")
    print(f"reference, the purge alone: {purge_s:.2f} s ({purge_s / erase_s:.0%} of the erase)")
    print(
        f"the user's turn texts left in the erased file's bytes: {left} of {len(own)} "
        f"(leaving out {len(texts) - len(own)} that other users' turns hold too, or too short)"
    )


if __name__ == "__main__":
    main()
