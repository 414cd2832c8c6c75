"""Speaker names: where an archive names who speaks, the turn keeps the name, hits return it,
and it is part of what the text index matches and what the embedder is given (``Name: text``),
on every backend. An archive without names reads, indexes and embeds as before."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.search import STM, ReadFilter
from mempipe.services.reembed.fill import embed_collection
from tests.helpers import ingest

DEFAULTS = IdentityDefaults(org_id="o", project_id="p", user_id="u")
SAID = "I moved to Lisbon last spring"


def chatgpt(path: Path) -> None:
    nodes = {
        "root": {"id": "root", "message": None, "parent": None},
        "n1": {
            "id": "n1",
            "parent": "root",
            "message": {
                "id": "m1",
                "author": {"role": "user", "name": "Caroline"},
                "content": {"content_type": "text", "parts": [SAID]},
                "create_time": 1700000000,
            },
        },
    }
    conversation = {"id": "c1", "title": "t", "mapping": nodes, "current_node": "n1"}
    path.write_text(json.dumps([conversation]))


def openai_chat(path: Path) -> None:
    message = {"role": "user", "name": "Caroline", "content": SAID}
    path.write_text(json.dumps({"id": "c1", "messages": [message]}) + "\n")


def canonical(field: str):
    def write(path: Path) -> None:
        turn = {"session_id": "c1", "role": "user", "content": SAID, field: "Caroline"}
        path.write_text(json.dumps(turn) + "\n")

    return write


def csv_with_role(path: Path) -> None:
    path.write_text(f'conversation_id,role,speaker,text\nc1,user,Caroline,"{SAID}"\n')


def parquet(path: Path) -> None:
    table = pa.table({"session_id": ["c1"], "role": ["user"], "name": ["Caroline"], "text": [SAID]})
    pq.write_table(table, path)


def claude(path: Path) -> None:
    message = {"uuid": "m1", "text": SAID, "sender": "human", "sender_name": "Caroline"}
    path.write_text(json.dumps([{"uuid": "c1", "chat_messages": [message]}]))


ARCHIVES = {
    "chatgpt": ("conversations.json", chatgpt),
    "openai": ("chat.jsonl", openai_chat),
    "turns-name": ("turns.jsonl", canonical("name")),
    "turns-speaker": ("turns.jsonl", canonical("speaker")),
    "csv": ("turns.csv", csv_with_role),
    "parquet": ("turns.parquet", parquet),
    "claude": ("claude.json", claude),
}


class Recording(HashingEmbedder):
    """The hashing embedder, keeping every text it is given."""

    def __init__(self) -> None:
        super().__init__(8)
        self.given: list[str] = []

    def embed(self, texts):
        self.given.extend(texts)
        return super().embed(texts)


def embedded(store) -> list[str]:
    """What a re-embed of the turns gives the embedder."""
    embedder = Recording()
    embed_collection(UnitOfWork(store), STM, embedder, run_id="r", batch_size=10)
    return embedder.given


def load(store, tmp_path: Path, name: str, write) -> None:
    archive = tmp_path / name
    write(archive)
    summary = ingest(store, archive, DEFAULTS, tmp_path / "rej")
    assert summary.turns_inserted == 1, summary


@pytest.mark.repositories("turns", "search")
@pytest.mark.parametrize("archive", ARCHIVES)
def test_a_named_speaker_is_kept_returned_matched_and_embedded(
    backend, searchable, tmp_path, archive
) -> None:
    load(backend, tmp_path, *ARCHIVES[archive])
    searchable()

    (hit,) = backend.search_text(STM, "caroline", ReadFilter(user_id="u"), 5)
    assert (hit.name, hit.text) == ("Caroline", SAID), "found by the name alone"
    assert embedded(backend) == [f"Caroline: {SAID}"]


@pytest.mark.repositories("turns", "search")
def test_an_archive_without_names_is_read_indexed_and_embedded_as_before(
    backend, searchable, tmp_path
) -> None:
    load(
        backend,
        tmp_path,
        "turns.jsonl",
        lambda p: p.write_text(
            json.dumps({"session_id": "c1", "role": "user", "content": SAID}) + "\n"
        ),
    )
    searchable()

    (hit,) = backend.search_text(STM, "lisbon", ReadFilter(user_id="u"), 5)
    assert (hit.name, hit.text) == (None, SAID)
    assert backend.search_text(STM, "caroline", ReadFilter(user_id="u"), 5) == []
    assert embedded(backend) == [SAID]


def test_a_speaker_column_without_a_role_column_is_the_role(tmp_path) -> None:
    from mempipe.archives.formats.tabular import resolve_columns

    assert resolve_columns(["conversation_id", "speaker", "text"], {})["role"] == "speaker"
    both = resolve_columns(["conversation_id", "role", "speaker", "text"], {})
    assert (both["role"], both["name"]) == ("role", "speaker")
