"""Answers a preview paid for, kept so that the replay that follows does not pay for them again.

``replay --preview`` writes nothing to the store, so what the provider answered it is kept in a
folder of its own (``memory.extraction.kept_answers``), one file per question, under a folder
per user: an erase removes the user's folder whole, and every preview page (kept in the same
folder) that shows the user's text. A question is its extractor (name and
model), its prompt's version, the memory type and the snapshot's content, so an answer is only
ever reused for the very question it answered; a kept answer is used once, then removed, and
one older than :data:`KEPT_FOR` is never used.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from pathlib import Path

import orjson
from pydantic import TypeAdapter

from mempipe.adapters.llm.base import Extractor, ExtractorCapabilities
from mempipe.adapters.llm.prompts import prompt_for
from mempipe.domain.ids import stable_id
from mempipe.domain.reconcile import Candidate, Verdict
from mempipe.schemas.extraction import Extracted
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.transcript import SnapshotContent

KEPT_FOR = 7 * 24 * 3600.0
"""Seconds a kept answer may wait for its replay."""
EXTRACTED = TypeAdapter(list[Extracted])
PAGES = "pages"
"""The kept folder's folder of preview pages."""
USERS_BLOCK = re.compile(r'<script type="application/json" id="mempipe-users">(.*?)</script>')


def user_folder(root: Path, user_id: str | None) -> Path:
    """All a user's kept answers, whatever org or project: what an erase removes."""
    return root / stable_id("user", user_id or "")


def kept_files(root: Path, user_id: str) -> int:
    """The files kept that hold something of one user: answers, and preview pages."""
    return len(_of_user(root, user_id))


def forget_user(root: Path, user_id: str) -> int:
    """Remove what is kept of one user (an erase): their answers, and every preview page that
    shows their text; returns the files removed."""
    files = _of_user(root, user_id)
    for path in files:
        path.unlink(missing_ok=True)
    shutil.rmtree(user_folder(root, user_id), ignore_errors=True)
    return len(files)


def _of_user(root: Path, user_id: str) -> list[Path]:
    folder = user_folder(root, user_id)
    pages = sorted((root / PAGES).glob("*.html"))
    return [
        *sorted(folder.rglob("*.json")),
        *(page for page in pages if user_id in shown_users(page)),
    ]


def shown_users(page: Path) -> list[str]:
    """The users whose text a preview page shows (its ``mempipe-users`` block)."""
    found = USERS_BLOCK.search(page.read_text(encoding="utf-8"))
    return list(orjson.loads(found.group(1))) if found else []


class KeptAnswers:
    """An extractor that answers from the kept answers first. ``keep``: the preview's way,
    where every answer the provider gives is kept; otherwise a kept answer is used and removed,
    and a new one is not kept."""

    def __init__(
        self, extractor: Extractor, llm: LLMSettings, root: Path, *, keep: bool = False
    ) -> None:
        self._extractor, self._llm, self._root, self._keep = extractor, llm, root, keep
        self.name: str = extractor.name
        self.capabilities: ExtractorCapabilities = extractor.capabilities
        self.reused = 0
        self.asked = 0

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]:
        version = prompt_for(self._llm, memory_type).version
        path = self._path(snapshot, "extract", memory_type.value, version)
        if (kept := self._kept(path)) is not None:
            return EXTRACTED.validate_json(kept)
        found = self._extractor.extract(snapshot, memory_type)
        self._store(path, EXTRACTED.dump_json(found))
        return found

    def summarize(self, snapshot: SnapshotContent) -> str:
        path = self._path(snapshot, "summarize")
        if (kept := self._kept(path)) is not None:
            return str(orjson.loads(kept))
        text = self._extractor.summarize(snapshot)
        self._store(path, orjson.dumps(text))
        return text

    def judge(self, text: str, existing: Candidate) -> Verdict:
        path = self._root / "judge" / stable_id("judge", self.name, text, existing.text)
        if (kept := self._kept(path)) is not None:
            return Verdict(orjson.loads(kept))
        verdict = self._extractor.judge(text, existing)
        self._store(path, orjson.dumps(verdict.value))
        return verdict

    def forget(self, user_id: str | None) -> int:
        """What is kept of one user removed (their owner erased while a preview asked)."""
        return forget_user(self._root, user_id or "")

    def _path(self, snapshot: SnapshotContent, *question: str) -> Path:
        content = hashlib.sha256(snapshot.model_dump_json().encode()).hexdigest()
        folder = user_folder(self._root, snapshot.user_id)
        owner = stable_id("owner", snapshot.org_id, snapshot.project_id)
        return folder / owner / f"{stable_id('answer', self.name, *question, content)}.json"

    def _kept(self, path: Path) -> bytes | None:
        try:
            fresh = time.time() - path.stat().st_mtime < KEPT_FOR
            data = path.read_bytes()
        except OSError:
            return None
        if not self._keep or not fresh:
            path.unlink(missing_ok=True)
        if not fresh:
            return None
        self.reused += 1
        return data

    def _store(self, path: Path, data: bytes) -> None:
        self.asked += 1
        if not self._keep:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        partial.write_bytes(data)
        os.replace(partial, path)
