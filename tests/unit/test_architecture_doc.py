"""ARCHITECTURE.md stays the true map: its repository table lists every port of the store with
exactly the methods the port declares, under the unit of work's attribute that hands it out."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _ports() -> dict[str, list[str]]:
    tree = ast.parse((ROOT / "mempipe" / "adapters" / "store" / "base.py").read_text())
    return {
        node.name: [b.name for b in node.body if isinstance(b, ast.FunctionDef)]
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(getattr(base, "id", "") == "Protocol" for base in node.bases)
        and node.name != "Store"
    }


def _handed_out() -> dict[str, str]:
    """Port name -> the unit of work's attribute typed as it."""
    tree = ast.parse((ROOT / "mempipe" / "adapters" / "store" / "unit_of_work.py").read_text())
    return {
        node.annotation.id: node.target.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute)
    }


def test_the_repository_table_lists_every_port_and_its_methods() -> None:
    doc = (ROOT / "ARCHITECTURE.md").read_text()
    rows = {
        port: (attribute, re.findall(r"`(\w+)`", methods))
        for attribute, port, methods in re.findall(
            r"^\| `uow\.(\w+)` \| `(\w+)` \| ([^|]+) \|", doc, flags=re.MULTILINE
        )
    }
    ports = _ports()
    assert set(rows) == set(ports)
    attributes = _handed_out()
    for port, methods in ports.items():
        assert rows[port] == (attributes[port], methods), port
