"""Parquet schemas derive from the pydantic models."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pyarrow as pa

from mempipe.schemas.arrow import arrow_schema, to_arrow_table
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.failure import Failure
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import SourceLocation, Turn


def test_every_model_field_becomes_a_column_with_its_nullability() -> None:
    schema = arrow_schema(AuditRow)
    assert schema.names == list(AuditRow.model_fields)
    assert schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert schema.field("day").type == pa.date32()
    assert schema.field("version").type == pa.int64()
    assert schema.field("similarity").type == pa.float64()
    assert not schema.field("memory_id").nullable
    assert schema.field("superseded_id").nullable


def test_free_form_dicts_become_json_text_and_nested_models_structs() -> None:
    schema = arrow_schema(Turn)
    assert schema.field("metadata").type == pa.string()
    assert schema.field("metadata").metadata == {b"encoding": b"json"}
    assert schema.field("tool_calls").type == pa.string()
    assert pa.types.is_struct(schema.field("source").type)


def test_rows_convert_to_a_table_of_that_schema() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    row = AuditRow(
        run_id="r",
        at=at,
        day=date(2024, 1, 1),
        org_id="o",
        project_id="p",
        memory_type="semantic",
        action=ReconcileAction.UPDATE,
        memory_id="m2",
        version=2,
        superseded_id="m1",
        similarity=0.91,
        text="home airport is LIS",
    )
    table = to_arrow_table([row], AuditRow)
    assert table.schema == arrow_schema(AuditRow)
    assert table.to_pylist()[0]["action"] == "UPDATE"
    turn = Turn(
        org_id="o",
        project_id="p",
        session_id="s",
        turn_seq=0,
        role="user",
        content="x",
        metadata={"k": 1},
        source=SourceLocation(path="f", line=1),
    )
    assert to_arrow_table([turn], Turn).to_pylist()[0]["metadata"] == '{"k":1}'


def test_schemas_exist_for_failures_and_rejects() -> None:
    assert "failure_class" in arrow_schema(Failure).names
    assert arrow_schema(Reject).names == [
        "path",
        "line",
        "index",
        "message_index",
        "reason",
        "raw",
        "offset",
        "whole_file",
        "identity_conflict",
    ]
