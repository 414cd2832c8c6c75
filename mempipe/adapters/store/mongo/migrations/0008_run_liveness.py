"""Runs record where they run (host, pid) and a heartbeat; leases are named locks held by a run
(an owner's replay work, a store's re-embed) that end when the run dies."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["leases"].create_index("run_id", name="leases_run")
    store.db["runs"].create_index("status", name="runs_running")
