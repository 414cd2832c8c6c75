"""The configuration reference's environment variables are made from the settings models, and
cannot drift: the page's table is what :func:`mempipe.settings.environment_reference` makes
(``MEMPIPE_DOCS_UPDATE=1`` writes it in), and every ``MEMPIPE_*`` name the code reads is one of
its rows."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mempipe.settings import environment_reference, environment_variables

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "reference" / "configuration.md"
BLOCK = re.compile(
    r"(<!-- environment-variables: made by [^>]*-->\n)(.*?)(<!-- environment-variables: end -->)",
    re.S,
)
NOT_READ = {
    "MEMPIPE_STORE_PASSWORD_",
    "MEMPIPE_PROVIDER_KEY_",
    "MEMPIPE_ENDPOINT_",
    "MEMPIPE_RETENTION_POLICY_",
}
"""Prefixes, and the one variable, that mempipe sets for the processes it starts, never read
from a user: the per-store passwords, the embedding models' endpoints and keys, the project's
retention policy."""


def test_the_page_shows_the_table_the_settings_make() -> None:
    text = PAGE.read_text()
    found = BLOCK.search(text)
    assert found is not None, "the page has its generated block"
    made = environment_reference()
    if os.environ.get("MEMPIPE_DOCS_UPDATE") and found.group(2) != made:
        PAGE.write_text(text[: found.start(2)] + made + text[found.end(2) :])
        return
    assert found.group(2) == made, "MEMPIPE_DOCS_UPDATE=1 pytest this file writes it in"


def test_every_variable_the_code_names_is_in_the_reference() -> None:
    declared = set(environment_variables())
    named = {
        name
        for path in (ROOT / "mempipe").rglob("*.py")
        for name in re.findall(r"\bMEMPIPE_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())
    }
    prefixes = {p for p in named if any(v.startswith(p + "_") for v in declared)}
    assert named - declared - prefixes - {n.rstrip("_") for n in NOT_READ} == set()
