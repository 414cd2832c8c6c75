"""A parameter whose values are a closed set, said in its JSON schema: Prefect's parameter
schema then carries the set, so that ``prefect deployment run --param format=chatgtp`` is
refused before a flow run exists, and the CLI's choices come from the same names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema


@dataclass(frozen=True)
class OneOf:
    """The values a text parameter takes, named when its schema is made (a registry's names
    include the plug-ins installed then); its validator still checks each value given."""

    values: Callable[[], list[str]]

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema: dict[str, Any] = handler(core_schema)
        schema["enum"] = list(self.values())
        return schema

    def __hash__(self) -> int:
        return hash(self.values)
