"""DESIGN rule: metadata partition-key syntax."""

from __future__ import annotations

import pytest

from mempipe.domain.partition_keys import filter_path, is_filterable, partition_key_problem
from mempipe.errors import ConfigError
from mempipe.schemas.config import MemoryConfig
from mempipe.settings import load_project_config


@pytest.mark.parametrize(
    "key", ["engagement_id", "tier", "a", "client.region", "x" + "a" * 63, "t2_b.c_3"]
)
def test_keys_of_the_documented_syntax_are_filterable(key: str) -> None:
    assert is_filterable(key)
    assert partition_key_problem(key) is None


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("Tier", "does not match"),
        ("$foo", "does not match"),
        ("a.b.c", "more than one dot"),
        ("1abc", "does not match"),
        ("x" + "a" * 64, "does not match"),
        ("", "does not match"),
        ("a..b", "more than one dot"),
        ("bad-dash", "does not match"),
    ],
)
def test_keys_outside_the_syntax_are_not_filterable(key: str, why: str) -> None:
    assert not is_filterable(key)
    assert why in (partition_key_problem(key) or "")


@pytest.mark.parametrize(
    "key",
    [
        "org_id",
        "project_id",
        "user_id",
        "agent_id",
        "content",
        "embedding",
        "embedding_model_id",
        "created_at",
        "user_id.name",
    ],
)
def test_reserved_names_are_rejected(key: str) -> None:
    assert "reserved" in (partition_key_problem(key) or "")


def test_filters_use_the_qualified_metadata_path() -> None:
    assert filter_path("engagement_id") == "metadata.engagement_id"


def test_a_config_declaring_a_bad_key_is_refused_with_the_reason(tmp_path) -> None:
    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  metadata_partition_keys: [engagement_id, Tier, org_id]\n")
    with pytest.raises(ConfigError) as raised:
        load_project_config(config)
    assert "'Tier'" in str(raised.value)
    assert "'org_id' is a reserved name" in str(raised.value)


def test_valid_declared_keys_are_kept_in_order() -> None:
    config = MemoryConfig(metadata_partition_keys=["engagement_id", "client.region"])
    assert config.metadata_partition_keys == ["engagement_id", "client.region"]
