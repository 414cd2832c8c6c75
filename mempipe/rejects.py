"""The rejects file: one JSON line per record that could not become a turn."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from mempipe.schemas.reject import Reject


def rejects_path(rejects_dir: str | Path, run_id: str, job: str = "backfill") -> Path:
    return (Path(rejects_dir) / f"{job}-{run_id}.jsonl").absolute()


def append_rejects(path: Path, rejects: Iterable[Reject]) -> int:
    """Append ``rejects``; the file and its directory are created on the first one only."""
    lines = [reject.model_dump_json() + "\n" for reject in rejects]
    if lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab", buffering=0) as out:  # one write: workers of a run append at once
            out.write("".join(lines).encode())
    return len(lines)
