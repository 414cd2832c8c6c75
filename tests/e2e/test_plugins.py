"""A third party's embedding provider, extractor, store backend and archive format, installed as
a package of their own and found through their entry points (``mempipe.embedding_providers``,
``mempipe.extractors``, ``mempipe.store_backends``, ``mempipe.archive_formats``): listed by
``mempipe models``, ``--extractor`` and ``--format``, and used by a re-embed, a replay and
backfills from the CLI, with no change to mempipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import read
from tests.processes import environment, run

pytestmark = pytest.mark.prefect

PLUGIN = '''
"""Vectors from letter counts: a provider as a third party writes one."""

import math
import re


class LetterEmbedder:
    model_id = "letters-26"
    dimensions = 26

    def embed(self, texts):
        vectors = []
        for text in texts:
            counts = [text.lower().count(chr(97 + i)) + 1e-3 for i in range(26)]
            norm = math.sqrt(sum(c * c for c in counts))
            vectors.append([c / norm for c in counts])
        return vectors


class LetterProvider:
    form = "letters-26"

    def claims(self, model_id):
        return re.fullmatch("letters-26", model_id) is not None

    def build(self, model_id):
        return LetterEmbedder()

    def catalog(self):
        return {"letters-26": 26}


class FirstWordsExtractor:
    """One semantic memory per snapshot: its first turn's first five words."""

    name = "first-words"

    def __init__(self, llm):
        from mempipe.adapters.llm.base import ExtractorCapabilities

        self.capabilities = ExtractorCapabilities()

    def extract(self, snapshot, memory_type):
        from mempipe.schemas.extraction import ExtractedSemantic

        if memory_type != "semantic":
            return []
        words = " ".join(snapshot.turns[0].content.split()[:5])
        return [ExtractedSemantic(text=f"Said first: {words}", label=snapshot.session_id)]

    def summarize(self, snapshot):
        raise NotImplementedError

    def judge(self, text, existing):
        raise NotImplementedError


class ChatLog:
    """``{"thread", "who", "said"}`` per line: a chat tool's log, as a third party reads it."""

    format = "chatlog"

    @staticmethod
    def recognises(record):
        return {"thread", "who", "said"} <= record.keys()

    def __init__(self, path):
        self.path = path
        self.seen = {}

    def __call__(self, record):
        from mempipe.archives.drafts import Draft
        from mempipe.archives.formats.conversation import record_source

        line = record.value
        seq = self.seen.setdefault(line["thread"], 0)
        self.seen[line["thread"]] = seq + 1
        fields = {"session_id": line["thread"], "turn_seq": seq, "role": line["who"]}
        yield Draft(fields | {"content": line["said"]}, record_source(self.path, record), record)


def open_vault(url, *, read_only):
    """A backend for ``vault:///PATH``: here, the SQLite store at PATH.vault."""
    from mempipe.adapters.store.sqlite.factory import open_sqlite_store

    path = url.removeprefix("vault://")
    return open_sqlite_store(f"sqlite:///{path}.vault", existing=read_only)
'''


def install_plugin(site: Path) -> None:
    """What ``pip install --target site`` of a one-module package leaves: the module and its
    dist-info, whose ``entry_points.txt`` registers the provider."""
    site.mkdir()
    (site / "mempipe_letters.py").write_text(PLUGIN)
    info = site / "mempipe_letters-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mempipe-letters\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[mempipe.embedding_providers]\nletters = mempipe_letters:LetterProvider\n"
        "[mempipe.extractors]\nfirst-words = mempipe_letters:FirstWordsExtractor\n"
        "[mempipe.store_backends]\nvault = mempipe_letters:open_vault\n"
        "[mempipe.archive_formats]\nchatlog = mempipe_letters:ChatLog\n"
    )
    (info / "RECORD").write_text("")


@pytest.mark.process("a package installed beside mempipe, found by a fresh interpreter")
def test_an_installed_provider_extractor_backend_and_format_are_listed_and_used_from_the_cli(
    prefect_server, fixtures, tmp_path
) -> None:
    install_plugin(tmp_path / "site")
    env = environment(prefect_server, PYTHONPATH=str(tmp_path / "site"))
    store = ["--store", f"sqlite:///{tmp_path / 'm.db'}"]
    loaded = run(["backfill", str(fixtures / "turns.jsonl"), *store], tmp_path, env)
    assert loaded.returncode == 0, loaded.stderr

    listed = run(["models", *store, "--json"], tmp_path, env)
    assert listed.returncode == 0, listed.stderr
    listed_model = {"id": "letters-26", "dimensions": 26, "active": False, "bridges": []}
    assert listed_model in json.loads(listed.stdout)

    moved = run(["reembed", "--model", "letters-26", "--collections", "stm", *store], tmp_path, env)
    assert moved.returncode == 0, moved.stderr
    served = read(
        tmp_path / "m.db",
        "SELECT model_id, dimensions FROM embedding_registry WHERE state = 'serving'",
    )
    assert served == [("letters-26", 26)]

    helped = run(["replay", "--help"], tmp_path, env)
    assert "first-words" in helped.stdout
    replayed = run(["replay", "--extractor", "first-words", *store, "--json"], tmp_path, env)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["added"] > 0
    said = read(tmp_path / "m.db", "SELECT text FROM memories_semantic")
    assert said
    assert all(text.startswith("Said first: ") for (text,) in said)

    vault = ["--store", f"vault://{tmp_path / 'notes'}"]
    kept = run(["backfill", str(fixtures / "turns.jsonl"), *vault, "--json"], tmp_path, env)
    assert kept.returncode == 0, kept.stderr
    assert (
        json.loads(kept.stdout)["turns_inserted"]
        == read(tmp_path / "notes.vault", "SELECT count(*) FROM turns")[0][0]
        > 0
    )

    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"thread": "t1", "who": "user", "said": "my flight to Lisbon is at nine"}\n'
        '{"thread": "t1", "who": "assistant", "said": "noted"}\n'
    )
    assert "chatlog" in run(["backfill", "--help"], tmp_path, env).stdout
    logged = run(["backfill", str(log), *store, "--json"], tmp_path, env)
    assert logged.returncode == 0, logged.stderr
    (read_as,) = json.loads(logged.stdout)["files"]
    assert (read_as["format"], read_as["turns_inserted"]) == ("chatlog", 2), "detected"
    said_first = "SELECT role, content FROM turns WHERE session_id = 't1' ORDER BY turn_seq"
    assert read(tmp_path / "m.db", said_first) == [
        ("user", "my flight to Lisbon is at nine"),
        ("assistant", "noted"),
    ]

    without = run(
        ["reembed", "--model", "letters-26", "--collections", "stm", *store],
        tmp_path,
        environment(prefect_server),
    )
    assert without.returncode == 1, "without the package, no provider claims the model"
    assert "unknown embedding model 'letters-26'" in without.stderr
