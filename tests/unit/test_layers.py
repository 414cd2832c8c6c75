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


def _imports(path: Path) -> list[tuple[str, str]]:
    return [
        (node.module or "", alias.name)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]


def test_services_take_store_roles_not_the_whole_store() -> None:
    """Each service names the roles it needs (mempipe.adapters.store.base), so a fake of those
    roles is enough to run it; the union ``Store`` is for the jobs that move whole stores."""
    services = Path(__file__).parents[2] / "mempipe" / "services"
    offenders = [
        f"{path.name}: {module}.{name}"
        for path in services.glob("*.py")
        for module, name in _imports(path)
        if module.startswith("mempipe.adapters.store") and name == "Store"
    ]
    assert offenders == []


def _decorated(layer: str, decorator: str) -> list[tuple[str, str]]:
    """(Prefect name, function name) of every ``@decorator(name=...)`` function in the layer."""
    found = []
    for path in (Path(__file__).parents[2] / "mempipe" / layer).glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for call in node.decorator_list:
                if isinstance(call, ast.Call) and getattr(call.func, "id", "") == decorator:
                    name = next(k.value.value for k in call.keywords if k.arg == "name")
                    found.append((name, node.name))
    return found


def test_flows_and_tasks_are_named_one_way() -> None:
    """A flow function is its Prefect name plus ``_flow``; a task function is its Prefect
    name; no task shares a flow's name (the Prefect UI would show two things as one)."""
    flows, tasks = _decorated("flows", "flow"), _decorated("tasks", "task")
    assert flows
    assert tasks
    assert [(n, f) for n, f in flows if f != n.replace("-", "_") + "_flow"] == []
    assert [(n, f) for n, f in tasks if f != n.replace("-", "_")] == []
    assert {n for n, _ in flows} & {n for n, _ in tasks} == set()
