"""Each archive format parses into the turns its source holds, in order, with their metadata."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from mempipe.archives import ArchiveReader
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import Turn


def read(path: Path, fmt: ArchiveFormat = ArchiveFormat.AUTO, **columns: str):
    defaults = IdentityDefaults(org_id="acme", project_id="support", user_id="cli-user")
    reader = ArchiveReader(path, fmt, defaults, columns)
    items = list(reader)
    return (
        reader,
        [i for i in items if isinstance(i, Turn)],
        [i for i in items if isinstance(i, Reject)],
    )


def test_chatgpt_export_follows_current_node_and_skips_regenerated_branches(fixtures) -> None:
    reader, turns, rejects = read(fixtures / "chatgpt_conversations.json")
    assert reader.format is ArchiveFormat.CHATGPT
    assert rejects == []
    lisbon = [t for t in turns if t.session_id == "cg-lisbon"]
    assert [(t.turn_seq, t.role, t.message_id) for t in lisbon] == [
        (0, "user", "u1"),
        (1, "assistant", "a1"),
        (2, "user", "u2"),
        (3, "assistant", "a2"),
    ]
    assert all("REGENERATED" not in t.content for t in turns)
    assert lisbon[1].model == "gpt-4o"
    assert lisbon[0].created_at.isoformat() == "2024-05-01T07:53:20+00:00"


def test_chatgpt_tool_calls_and_tool_results_are_turns_and_hidden_context_is_not(fixtures) -> None:
    _, turns, _ = read(fixtures / "chatgpt_conversations.json")
    weather = [t for t in turns if t.session_id == "cg-weather"]
    assert [t.role for t in weather] == ["user", "assistant", "tool", "assistant"]
    assert weather[1].tool_calls == [{"recipient": "browser", "content_type": "code"}]
    assert weather[2].name == "browser"
    assert weather[2].content == "Porto: 18C, light rain"
    assert all("I like trains" not in t.content for t in weather)


def test_claude_export_reads_content_blocks_and_the_older_text_shape(fixtures) -> None:
    reader, turns, rejects = read(fixtures / "claude_conversations.json")
    assert reader.format is ArchiveFormat.CLAUDE
    assert rejects == []
    assert [(t.session_id, t.turn_seq, t.role, t.message_id) for t in turns] == [
        ("cl-7f3a", 0, "user", "cl-m1"),
        ("cl-7f3a", 1, "assistant", "cl-m2"),
        ("cl-old-shape", 0, "user", "cl-o1"),
        ("cl-old-shape", 1, "assistant", "cl-o2"),
    ]
    assert turns[1].content == "Step 1: run the migrations. Step 2: roll out the canary."
    assert turns[1].tool_calls == [
        {"type": "tool_use", "name": "search_docs", "input": {"q": "billing deploy"}}
    ]
    assert {t.user_id for t in turns} == {"acct-42"}, (
        "a default not named fills only what is missing"
    )


def test_sharegpt_maps_roles_system_prompt_and_function_calls(fixtures) -> None:
    reader, turns, rejects = read(fixtures / "sharegpt.json")
    assert reader.format is ArchiveFormat.SHAREGPT
    assert rejects == []
    tools = [t for t in turns if t.session_id == "sg-2"]
    assert [t.role for t in tools] == ["system", "user", "assistant", "tool", "assistant"]
    assert tools[2].tool_calls == [{"type": "function_call"}]
    assert turns[0].user_id == "cli-user", "the CLI's user fills records that carry none"


def test_openai_chat_shape_keeps_tool_calls_parts_and_conversation_identity(fixtures) -> None:
    reader, turns, rejects = read(fixtures / "openai_chat.jsonl")
    assert reader.format is ArchiveFormat.OPENAI
    assert rejects == []
    first = [t for t in turns if t.session_id == "oa-1"]
    assert [t.role for t in first] == ["system", "user", "assistant", "tool", "assistant"]
    assert first[1].content == "Book me a window seat to Oslo."
    assert first[2].content == ""
    assert first[2].tool_calls[0]["function"]["name"] == "book"
    assert first[3].tool_call_id == "call_1"
    assert {t.user_id for t in first} == {"u-ana"}
    assert first[0].source.line == 1
    assert first[3].source.message_index == 3


def test_canonical_turns_keep_metadata_model_and_message_ids(fixtures) -> None:
    reader, turns, rejects = read(fixtures / "turns.jsonl")
    assert reader.format is ArchiveFormat.TURNS
    assert rejects == []
    assert [(t.session_id, t.turn_seq, t.message_id) for t in turns] == [
        ("sess-a", 0, "m-1"),
        ("sess-a", 1, "m-2"),
        ("sess-b", 0, "m-3"),
        ("sess-b", 1, "m-4"),
    ]
    assert turns[0].metadata == {"engagement_id": "eng-alpha", "tier": 2}
    assert turns[1].metadata == {}
    assert turns[1].model == "gpt-4o-mini"
    assert (turns[0].org_id, turns[0].project_id, turns[0].user_id) == ("acme", "support", "u-1")


def test_csv_columns_are_found_by_alias(fixtures) -> None:
    reader, turns, rejects = read(fixtures / "turns.csv")
    assert reader.format is ArchiveFormat.CSV
    assert rejects == []
    assert [(t.session_id, t.turn_seq, t.role, t.message_id) for t in turns] == [
        ("csv-1", 0, "user", "c-1"),
        ("csv-1", 1, "assistant", "c-2"),
        ("csv-1", 2, "user", "c-3"),
        ("csv-2", 0, "user", "c-4"),
    ]
    assert turns[0].content == "Hello, I need help with my order."
    assert turns[0].source.line == 2


def test_parquet_with_an_explicit_column_mapping(tmp_path) -> None:
    path = tmp_path / "export.parquet"
    table = pa.table(
        {
            "thread": ["p-1", "p-1", "p-2"],
            "who": ["user", "assistant", "user"],
            "utterance": ["hi", "hello", "bye"],
            "seq": [0, 1, 0],
            "at": pa.array(
                ["2024-01-01T00:00:00", "2024-01-01T00:00:01", "2024-01-02T00:00:00"]
            ).cast(pa.timestamp("s")),
        }
    )
    pq.write_table(table, path)
    reader, turns, rejects = read(
        path, session_id="thread", role="who", content="utterance", turn_seq="seq", created_at="at"
    )
    assert reader.format is ArchiveFormat.PARQUET
    assert rejects == []
    assert [(t.session_id, t.turn_seq, t.role, t.content) for t in turns] == [
        ("p-1", 0, "user", "hi"),
        ("p-1", 1, "assistant", "hello"),
        ("p-2", 0, "user", "bye"),
    ]
    assert turns[2].source.index == 2
    assert turns[1].created_at.isoformat() == "2024-01-01T00:00:01+00:00"


def test_a_table_without_a_role_column_is_rejected_whole_with_a_hint(tmp_path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("session_id,content\ns,hello\n")
    _, turns, rejects = read(path)
    assert turns == []
    assert len(rejects) == 1
    assert "--column role=COLUMN" in rejects[0].reason


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_compressed_archives_are_detected_by_their_magic_bytes(fixtures, tmp_path, codec) -> None:
    data = (fixtures / "chatgpt_conversations.json").read_bytes()
    path = tmp_path / ("conversations.json.gz" if codec == "gzip" else "conversations.json.zst")
    path.write_bytes(
        gzip.compress(data) if codec == "gzip" else zstandard.ZstdCompressor().compress(data)
    )
    reader, turns, rejects = read(path)
    assert reader.format is ArchiveFormat.CHATGPT
    assert len(turns) == 8
    assert rejects == []
    assert reader.bytes_read == path.stat().st_size


def test_a_single_pretty_printed_conversation_is_one_record(fixtures, tmp_path) -> None:
    path = tmp_path / "one.json"
    path.write_text(
        '{\n  "id": "solo",\n  "messages": [\n    {"role": "user", "content": "hi"}\n  ]\n}\n'
    )
    reader, turns, _ = read(path)
    assert reader.format is ArchiveFormat.OPENAI
    assert [(t.session_id, t.content) for t in turns] == [("solo", "hi")]


def test_an_explicit_format_overrides_detection(fixtures) -> None:
    reader, turns, rejects = read(fixtures / "openai_chat.jsonl", ArchiveFormat.TURNS)
    assert reader.format is ArchiveFormat.TURNS
    assert turns == []
    assert all("unknown field(s): id, messages" in r.reason for r in rejects)
