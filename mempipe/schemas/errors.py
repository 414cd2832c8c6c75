"""Readable one-line descriptions of pydantic validation errors."""

from __future__ import annotations

from pydantic import ValidationError


def describe(exc: ValidationError, *, with_input: bool = False) -> str:
    """``field.path: message`` per error, joined by ``; `` (optionally naming the bad input)."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "record"
        got = f" (got {error['input']!r})" if with_input and "input" in error else ""
        parts.append(f"{where}: {error['msg']}{got}")
    return "; ".join(parts)
