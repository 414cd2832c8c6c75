"""Configuration: project-config.yaml, environment overrides and argument precedence."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mempipe.bootstrap import load_context
from mempipe.errors import ConfigError
from mempipe.schemas.config import CustomTypeConfig, PromotionLimits
from mempipe.schemas.indexes import Quantization
from mempipe.schemas.memory import MemoryType
from mempipe.settings import load_project_config
from tests.docs import page

CONFIG = """
org_id: acme
project_id: support
memory:
  extraction:
    enabled: [semantic, taxonomic]
  promotion:
    max_messages: 12
    idle_period: 45m
  metadata_partition_keys: [engagement_id]
  custom_types:
    - name: ticket
      tags: {priority: string}
"""


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "project-config.yaml"
    path.write_text(CONFIG)
    return path


def test_the_project_config_file_is_read(config_file) -> None:
    config = load_project_config(config_file)
    assert [t.value for t in config.memory.extraction.enabled] == ["semantic", "taxonomic"]
    assert config.memory.promotion == PromotionLimits(
        max_messages=12, idle_period=timedelta(minutes=45)
    )
    assert config.memory.custom_types[0].name == "ticket"


def test_a_missing_config_file_means_defaults(tmp_path) -> None:
    config = load_project_config(tmp_path / "absent.yaml")
    assert len(config.memory.extraction.enabled) == 4
    assert config.memory.promotion.max_messages == 20


def test_the_enabled_extractions_variable_overrides_the_file(config_file, monkeypatch) -> None:
    monkeypatch.setenv("MEMPIPE_ENABLED_EXTRACTIONS", "episodic, procedural")
    config = load_project_config(config_file)
    assert [t.value for t in config.memory.extraction.enabled] == ["episodic", "procedural"]


def test_the_platforms_name_for_the_list_is_read_where_mempipes_is_not_set(
    config_file, monkeypatch
) -> None:
    monkeypatch.delenv("MEMPIPE_ENABLED_EXTRACTIONS", raising=False)
    monkeypatch.setenv("MONGOMEM_ENABLED_EXTRACTIONS", "taxonomic")
    assert [t.value for t in load_project_config(config_file).memory.extraction.enabled] == [
        "taxonomic"
    ]
    monkeypatch.setenv("MEMPIPE_ENABLED_EXTRACTIONS", "semantic")
    assert [t.value for t in load_project_config(config_file).memory.extraction.enabled] == [
        "semantic"
    ]


def test_an_unknown_extraction_type_is_a_config_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MONGOMEM_ENABLED_EXTRACTIONS", "semantic,telepathic")
    with pytest.raises(ConfigError, match="telepathic"):
        load_project_config(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("given", "seconds"), [("30m", 1800), ("2h", 7200), ("90s", 90), ("PT10M", 600), (60, 60)]
)
def test_idle_periods_read_as_durations(given, seconds) -> None:
    assert PromotionLimits(idle_period=given).idle_period.total_seconds() == seconds


def test_a_custom_type_cannot_reuse_a_built_in_name() -> None:
    with pytest.raises(ValueError, match="built-in"):
        CustomTypeConfig(name="semantic")


def test_identity_defaults_prefer_arguments_then_environment_then_file(
    config_file, monkeypatch
) -> None:
    context = load_context(config=config_file)
    assert context.identity_defaults().org_id == "acme"
    monkeypatch.setenv("MEMPIPE_ORG_ID", "env-org")
    context = load_context(config=config_file)
    assert context.identity_defaults().org_id == "env-org"
    assert context.identity_defaults(org_id="arg-org").org_id == "arg-org"
    assert context.identity_defaults().project_id == "support"


def test_store_url_prefers_the_argument_over_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MEMPIPE_STORE", "sqlite:///env.db")
    assert load_context(config=tmp_path / "none.yaml").store_url == "sqlite:///env.db"
    assert load_context("sqlite:///arg.db", tmp_path / "none.yaml").store_url == "sqlite:///arg.db"


def test_a_config_file_that_is_not_a_mapping_is_refused(tmp_path) -> None:
    path = tmp_path / "project-config.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_project_config(path)


def test_the_configuration_pages_example_is_a_valid_configuration(tmp_path) -> None:
    block = page("reference/configuration.md").split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "project-config.yaml").write_text(block)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "semantic.txt").write_text("Extract the user's facts.")
    config = load_project_config(tmp_path / "project-config.yaml")
    assert config.memory.extraction.prompts[MemoryType.SEMANTIC].version.startswith("labels-v2@")
    declared = config.memory.vector_index.declared()
    assert declared["stm"] is Quantization.BINARY
    assert declared["semantic"] is Quantization.NONE
