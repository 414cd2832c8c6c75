"""A queries file as eval reads it: unknown fields ignored and counted (refused with --strict),
results grouped by a field the file carries, a blank query refused with its line."""

from __future__ import annotations

import json

import pytest

from mempipe.errors import ConfigError
from mempipe.services.evaluation import read_queries


def written(tmp_path, *lines: dict) -> object:
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n")
    return path


LINES = (
    {"query": "a", "relevant_ids": ["1"], "question_type": "temporal", "answer": "x", "id": 1},
    {"query": "b", "relevant_ids": ["2"], "question_type": "multi-session", "answer": "y"},
    {"query": "c", "relevant_ids": ["3"], "category": 4},
)


def test_unknown_fields_are_ignored_and_counted(tmp_path) -> None:
    read = read_queries(written(tmp_path, *LINES))
    assert len(read.queries) == 3
    assert read.group_by == "category", "the first of the known grouping fields present"
    assert read.ignored_fields == {"answer": 2, "id": 1, "question_type": 2}
    assert [q.group for q in read.queries] == [None, None, "4"]


def test_an_explicit_grouping_field_is_used_and_not_counted_as_ignored(tmp_path) -> None:
    read = read_queries(written(tmp_path, *LINES), group_by="question_type")
    assert [q.group for q in read.queries] == ["temporal", "multi-session", None]
    assert read.ignored_fields == {"answer": 2, "category": 1, "id": 1}


def test_strict_refuses_the_first_unknown_field_with_its_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"queries.jsonl:1: unknown field\(s\) answer, id"):
        read_queries(written(tmp_path, *LINES), strict=True, group_by="question_type")


@pytest.mark.parametrize("query", ["", "  "])
def test_a_blank_query_is_refused_with_its_line(tmp_path, query) -> None:
    path = written(tmp_path, LINES[0], {"query": query, "relevant_ids": ["9"]})
    with pytest.raises(ConfigError, match=r"queries\.jsonl:2: .*the query is empty"):
        read_queries(path)
