"""Arrow schemas derived from the pydantic models, so a Parquet file's columns are never written
down twice. Free-form dicts (``metadata``, ``tags``) become JSON text columns."""

from __future__ import annotations

import functools
import types
from collections.abc import Sequence
from datetime import date, datetime
from enum import Enum
from typing import Annotated, Any, Union, get_args, get_origin

import orjson
import pyarrow as pa
from pydantic import BaseModel

JSON_TEXT = b"json"


def _unwrap(annotation: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` both stand for X here."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _unwrap(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in get_args(annotation) if a is not type(None)]
        return _unwrap(inner)
    return annotation


def _holds_dict(annotation: Any) -> bool:
    """Free-form dicts anywhere in a field make it a JSON text column."""
    annotation = _unwrap(annotation)
    if annotation is dict or get_origin(annotation) is dict:
        return True
    return get_origin(annotation) is list and _holds_dict(get_args(annotation)[0])


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of one field's annotation (without its nullability)."""
    annotation = _unwrap(annotation)
    if _holds_dict(annotation):
        return pa.string()
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        return pa.list_(arrow_type(item))
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return pa.struct(list(arrow_schema(annotation)))
        if issubclass(annotation, Enum):
            return pa.string()
        for python, arrow in _SCALARS:
            if issubclass(annotation, python):
                return arrow
    raise TypeError(f"no Arrow type for {annotation!r}")


_SCALARS: tuple[tuple[type, pa.DataType], ...] = (
    (bool, pa.bool_()),
    (int, pa.int64()),
    (float, pa.float64()),
    (str, pa.string()),
    (datetime, pa.timestamp("us", tz="UTC")),
    (date, pa.date32()),
)


def _nullable(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


@functools.cache
def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """Made once per model: every page of an export and a bundle import asks for it."""
    fields = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        is_json = _holds_dict(annotation)
        fields.append(
            pa.field(
                name,
                arrow_type(annotation),
                nullable=_nullable(annotation),
                metadata={b"encoding": JSON_TEXT} if is_json else None,
            )
        )
    return pa.schema(fields)


@functools.cache
def _json_columns(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(
        f.name
        for f in arrow_schema(model)
        if f.metadata and f.metadata.get(b"encoding") == JSON_TEXT
    )


def to_arrow_table(rows: Sequence[BaseModel], model: type[BaseModel]) -> pa.Table:
    return pa.Table.from_pylist(arrow_rows(rows, model), schema=arrow_schema(model))


def arrow_rows(rows: Sequence[BaseModel], model: type[BaseModel]) -> list[dict[str, Any]]:
    """The models as the plain rows their Arrow table is made of (JSON columns as text)."""
    json_columns = _json_columns(model)
    records = []
    for row in rows:
        record = row.model_dump(mode="python")
        for column in json_columns:
            if record[column] is not None:
                record[column] = orjson.dumps(record[column]).decode()
        records.append({k: v.value if isinstance(v, Enum) else v for k, v in record.items()})
    return records


def from_arrow_rows(rows: Sequence[dict[str, Any]], model: type[BaseModel]) -> list[BaseModel]:
    """Rows read back from a table written by :func:`to_arrow_table`, as models."""
    json_columns = _json_columns(model)
    records = []
    for row in rows:
        for column in json_columns:
            if row.get(column) is not None:
                row[column] = orjson.loads(row[column])
        records.append(model.model_validate(row))
    return records
