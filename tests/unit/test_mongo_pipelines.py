"""What the MongoDB adapter sends to Atlas: index definitions and pipelines, checked as data
(Atlas Search and Vector Search do not run where CI does)."""

from __future__ import annotations

import pytest

from mempipe.adapters.store.mongo import pipelines
from mempipe.adapters.store.mongo.configuration import config_from_url
from mempipe.adapters.store.mongo.documents import source_query
from mempipe.adapters.store.mongo.search_indexes import IndexNotQueryableError, SearchIndexes
from mempipe.errors import StoreError
from mempipe.schemas.search import ReadFilter

EVERYTHING = ReadFilter(
    org_id="o",
    project_id="p",
    user_id="u",
    agent_id="a",
    session_id="s",
    visibility="private",
    metadata={"metadata.engagement_id": "e1"},
)


def test_the_vector_index_declares_the_vector_and_every_filtered_field() -> None:
    definition = pipelines.vector_index_definition(
        "semantic", "embedding", 384, ("engagement_id", "client.region")
    )
    assert definition == {
        "fields": [
            {"type": "vector", "path": "embedding", "numDimensions": 384, "similarity": "cosine"},
            {"type": "filter", "path": "org_id"},
            {"type": "filter", "path": "project_id"},
            {"type": "filter", "path": "user_id"},
            {"type": "filter", "path": "agent_id"},
            {"type": "filter", "path": "session_id"},
            {"type": "filter", "path": "visibility"},
            {"type": "filter", "path": "status"},
            {"type": "filter", "path": "metadata.engagement_id"},
            {"type": "filter", "path": "metadata.client.region"},
        ]
    }


@pytest.mark.parametrize("source", ["stm", "semantic", "episodic", "taxonomic", "ticket"])
def test_every_field_a_search_filters_on_is_declared_by_its_indexes(source) -> None:
    filters = EVERYTHING.model_copy(update={"visibility": None} if source == "stm" else {})
    collection = "custom" if source == "ticket" else source
    query = source_query(source, filters)
    vector = pipelines.vector_index_definition(collection, "embedding", 8, ("engagement_id",))
    text = pipelines.text_index_definition(collection, ("engagement_id",))
    assert set(query) <= set(pipelines.declared_filters(vector))
    tokens = text["mappings"]["fields"]
    for path in query:
        node = tokens
        *parents, leaf = path.split(".")
        for parent in parents:
            node = node[parent]["fields"]
        assert node[leaf] == {"type": "token"}, path


def test_vector_search_carries_the_identity_filter_inside_the_stage() -> None:
    pipeline = pipelines.vector_search_pipeline(
        "vector_hashing_8", "embedding", [0.5] * 8, 5, source_query("semantic", EVERYTHING)
    )
    assert pipeline[0] == {
        "$vectorSearch": {
            "index": "vector_hashing_8",
            "path": "embedding",
            "queryVector": [0.5] * 8,
            "numCandidates": 100,
            "limit": 5,
            "filter": {
                "org_id": {"$eq": "o"},
                "project_id": {"$eq": "p"},
                "user_id": {"$eq": "u"},
                "agent_id": {"$eq": "a"},
                "session_id": {"$eq": "s"},
                "visibility": {"$eq": "private"},
                "metadata.engagement_id": {"$eq": "e1"},
                "status": {"$eq": "active"},
            },
        }
    }
    assert pipeline[1]["$project"]["score"] == {"$meta": "vectorSearchScore"}
    assert len(pipeline) == 2, "nothing filters after the stage"


def test_an_omitted_identity_field_adds_no_clause() -> None:
    query = source_query("semantic", ReadFilter(org_id="o"))
    assert query == {"org_id": {"$eq": "o"}, "status": {"$eq": "active"}}
    stage = pipelines.vector_search_stage("i", "embedding", [1.0], 3, {})
    assert "filter" not in stage["$vectorSearch"]


def test_text_search_filters_with_equals_inside_the_search_stage() -> None:
    pipeline = pipelines.text_search_pipeline(
        "stm", "refund policy", 7, source_query("stm", ReadFilter(org_id="o", user_id="u"))
    )
    assert pipeline == [
        {
            "$search": {
                "index": "text",
                "compound": {
                    "must": [{"text": {"query": "refund policy", "path": ["content", "name"]}}],
                    "filter": [
                        {"equals": {"path": "org_id", "value": "o"}},
                        {"equals": {"path": "user_id", "value": "u"}},
                    ],
                },
            }
        },
        {"$limit": 7},
        pipelines.project("searchScore"),
    ]


def test_atlas_cosine_scores_map_back_to_cosine_similarity() -> None:
    assert pipelines.cosine(1.0) == 1.0
    assert pipelines.cosine(0.5) == 0.0
    assert pipelines.cosine(0.0) == -1.0


def test_each_model_writes_its_own_field_beside_the_serving_one() -> None:
    assert pipelines.vector_path("all-MiniLM-L6-v2", first=True) == "embedding"
    assert pipelines.vector_path("all-MiniLM-L6-v2", first=False) == "embedding_all_minilm_l6_v2"
    assert pipelines.vector_index_name("openai:text-embedding-3-small") == (
        "vector_openai_text_embedding_3_small"
    )


def test_the_database_comes_from_the_url_or_the_environment(monkeypatch) -> None:
    assert config_from_url("mongodb+srv://u:secret@cluster0.x.net/memory?w=majority").database == (
        "memory"
    )
    monkeypatch.setenv("MEMPIPE_MONGODB_DATABASE", "ops")
    config = config_from_url("mongodb://u:secret@localhost:27017/?directConnection=true")
    assert config.database == "ops"
    assert "secret" not in config.display_url
    with pytest.raises(StoreError, match="mongodb://"):
        config_from_url("postgres://x/y")
    with pytest.raises(StoreError, match="not a valid MongoDB database name"):
        config_from_url("mongodb://localhost/bad.name")


class FakeIndexes:
    """A collection's search-index listing as a sequence of states over time."""

    name = "semantic"

    def __init__(self, states: list[dict]) -> None:
        self.states = states

    def list_search_indexes(self, name: str):
        return iter([self.states.pop(0)] if len(self.states) > 1 else [self.states[0]])


def waiting(timeout: float = 30.0) -> tuple[SearchIndexes, list[float]]:
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    return SearchIndexes("store", timeout, 5.0, sleep=sleep, clock=lambda: clock[0]), slept


def test_waiting_returns_once_the_index_is_ready_and_queryable() -> None:
    states = [
        {"name": "v", "status": "PENDING", "queryable": False},
        {"name": "v", "status": "BUILDING", "queryable": False},
        {"name": "v", "status": "READY", "queryable": True},
    ]
    indexes, slept = waiting()
    indexes.wait_queryable(FakeIndexes(states), "v")
    assert slept == [5.0, 5.0]


def test_an_index_that_never_becomes_queryable_ends_in_a_clear_error_after_the_timeout() -> None:
    indexes, slept = waiting(12.0)
    with pytest.raises(IndexNotQueryableError, match=r"semantic\.v is not queryable after 12 s"):
        indexes.wait_queryable(FakeIndexes([{"status": "PENDING", "queryable": False}]), "v")
    assert sum(slept) == 12.0


def test_a_failed_index_build_is_reported_with_its_reason() -> None:
    indexes, _ = waiting()
    failed = FakeIndexes([{"status": "FAILED", "queryable": False, "message": "bad mapping"}])
    with pytest.raises(IndexNotQueryableError, match="failed to build: bad mapping"):
        indexes.wait_queryable(failed, "v")


def test_vector_search_stays_within_atlas_bounds_and_runs_exact_when_asked() -> None:
    wide = pipelines.vector_search_stage("v", "embedding", [0.5] * 8, 20_000, {})["$vectorSearch"]
    assert wide["limit"] <= wide["numCandidates"] <= 10_000
    exact = pipelines.vector_search_stage("v", "embedding", [0.5] * 8, 5, {}, exact=True)
    assert exact["$vectorSearch"]["exact"] is True
    assert "numCandidates" not in exact["$vectorSearch"], "Atlas refuses it with exact: true"
