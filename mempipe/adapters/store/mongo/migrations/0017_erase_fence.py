"""An erase fences its owner: ``erased_owners`` records each erase, and on SQLite a trigger on
every table that holds an owner's text drops any row of that owner written by work that began
before the erase committed, in the writer's own transaction, whatever process it runs in.

``mempipe_writer_epoch()`` is a function each mempipe connection defines (when the writing work
began); a connection without it cannot write an erased owner's rows at all. ``RAISE(IGNORE)``
skips that row only, so a batch of many owners goes on without it."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["erased_owners"].create_index([("user_id", 1)], name="erased_owners_user")
