"""Extraction: the audit log, the embedding registry, and one active record per key and scope."""

from __future__ import annotations

from typing import Any

KEYED = {"semantic": "label", "procedural": "name", "taxonomic": "term"}
SCOPE = ("org_id", "project_id", "user_id", "agent_id", "visibility")


def apply(store: Any) -> None:
    db = store.db
    db["audit"].create_index([("day", 1)], name="audit_day")
    db["audit"].create_index([("run_id", 1)], name="audit_run")
    for memory_type, key in KEYED.items():
        # One active record per key and scope (null and absent identity fields compare equal).
        db[memory_type].create_index(
            [(f, 1) for f in (*SCOPE, key)],
            unique=True,
            partialFilterExpression={"status": "active"},
            name="active_key",
        )
