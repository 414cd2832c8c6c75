"""An identity the operator names is never silently replaced by one a record carries.

A record's own identity fields are its own; the identity a job brings records in with fills
what a record lacks. Where a record carries an id that differs from one the operator *named*
(a command's option, a flow's parameter; not a default from the environment or the
configuration), the policy the command chose decides: ``strict`` (the default) makes the record
a reject naming both ids, ``record`` keeps the record's, ``command`` writes the named one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mempipe.schemas.identity import IDENTITY_FIELDS, IdentityDefaults, IdentityPolicy


def settle_identity(
    fields: dict[str, Any], given: IdentityDefaults, keys: Iterable[str] = IDENTITY_FIELDS
) -> str | None:
    """Fill ``fields``' identity in place from ``given``; the reason the record is a reject
    when it conflicts with a named id under the strict policy (else None)."""
    for key in keys:
        own, value = fields.get(key), getattr(given, key, None)
        if own is None or own == "":
            fields[key] = value
        elif key in given.named and value is not None and str(own).strip() != value:
            if given.policy is IdentityPolicy.COMMAND:
                fields[key] = value
            elif given.policy is IdentityPolicy.STRICT:
                return conflict_reason(key, str(own), value)
    return None


def conflict_reason(key: str, own: str, named: str) -> str:
    option = f"--{key.replace('_', '-')}"
    return (
        f"identity conflict: the record's {key} is {own!r}, {option} named {named!r} "
        f"(--identity record keeps the record's, --identity command writes {named!r})"
    )
