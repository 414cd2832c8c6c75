"""Small readers shared by tests that compare two runs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from mempipe.services.audit import scan_audit


def audit_actions(audit_dir: Path) -> Counter:
    """(memory type, action, text) of every audit row, counted: what two runs must agree on."""
    frame = scan_audit(audit_dir).collect()
    return Counter(zip(frame["memory_type"], frame["action"], frame["text"], strict=True))
