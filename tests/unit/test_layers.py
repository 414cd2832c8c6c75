"""The architecture's direction: lower layers never import higher ones."""

from __future__ import annotations

import ast
from pathlib import Path


def test_domain_and_schemas_import_nothing_from_adapters() -> None:
    """The layers point one way: value types and pure rules never reach into adapters."""
    package = Path(__file__).parents[2] / "mempipe"
    offenders = []
    for layer in ("domain", "schemas"):
        for path in (package / layer).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "mempipe.adapters"
                ):
                    offenders.append(f"{path.name}: {node.module}")
    assert offenders == []
