"""Write-once declarations: a partition key, once declared, cannot be removed; a custom type,
once accepted, cannot be edited or removed (declare a new name instead). Adding is fine, and an
added partition key leaves existing vector indexes drifted until rebuilt on purpose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mempipe.errors import ConfigError
from mempipe.schemas.config import CustomTypeConfig


def declared_definitions(
    partition_keys: Sequence[str], custom_types: Sequence[CustomTypeConfig]
) -> dict[tuple[str, str], str]:
    """What a configuration declares, as (kind, name) → definition text, the form recorded and
    compared write-once."""
    return {("partition_key", key): "{}" for key in partition_keys} | {
        ("custom_type", t.name): t.model_dump_json() for t in custom_types
    }


def check_declarations(
    recorded: Mapping[tuple[str, str], str], declared: Mapping[tuple[str, str], str]
) -> list[tuple[str, str]]:
    """The (kind, name) pairs ``declared`` adds; a removal or a change is refused."""
    problems = []
    for (kind, name), definition in recorded.items():
        if (kind, name) not in declared:
            problems.append(f"{kind} {name!r} was declared and cannot be removed")
        elif declared[(kind, name)] != definition:
            problems.append(f"{kind} {name!r} cannot change; declare a new name instead")
    if problems:
        raise ConfigError("write-once configuration: " + "; ".join(problems))
    return [key for key in declared if key not in recorded]


def column_for(key: str) -> str:
    """The vector-index filter column of a metadata partition key (``client.region`` →
    ``meta_client__region``)."""
    return "meta_" + key.replace(".", "__")
