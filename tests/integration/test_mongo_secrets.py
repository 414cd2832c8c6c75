"""A MongoDB URL's password reaches the driver and nothing else: every command runs on the
strict Atlas fake with ``mongodb://ops:PASSWORD@…``, then by a Prefect Secret block's name as a
deployment passes it; Prefect's database (flow-run parameters, logs, artifacts, events), the
store's documents (run records included), stdout, stderr and every file mempipe wrote are
searched for the password. After the erase, the same places hold none of the user's text."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bson import json_util
from click.testing import CliRunner

from mempipe.adapters.store.mongo import factory
from mempipe.cli import cli
from mempipe.credentials import KEPT_PREFIX
from mempipe.flows.backfill import backfill_flow
from tests.fakes import atlas
from tests.helpers import MARK, USER, write_marked_archive
from tests.leaks import hits_in_database, hits_in_files, hits_in_text

pytestmark = pytest.mark.prefect


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> tuple[object, list[str]]:
    """One strict Atlas fake for every store opened on ``mongomock``; it refuses a URL without
    the password, as a server with authentication on would."""
    fake = atlas.client()
    given: list[str] = []

    def client(url: str, **options: object) -> object:
        given.append(url)
        if urlsplit(url).password != PASSWORD:
            raise AssertionError(f"the driver got {url!r} without the password")
        return fake

    monkeypatch.setattr(factory, "MongoClient", client)
    for name, delay in atlas.STRICT.items():
        monkeypatch.setattr(atlas, name, delay)
    monkeypatch.setenv("MEMPIPE_MONGODB_INDEX_POLL", "0.02")
    return fake, given


PASSWORD = "pw-" + secrets.token_hex(10)


def prefect_database() -> Path:
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url.get_secret_value()
    return Path(url.split(":///", 1)[1])


def documents(fake: object) -> str:
    """Every document of every database on the fake server, as extended JSON."""
    return "\n".join(
        json_util.dumps(document)
        for name in fake.list_database_names()  # type: ignore[attr-defined]
        for collection in fake[name].list_collection_names()  # type: ignore[index]
        for document in fake[name][collection].find()  # type: ignore[index]
    )


def test_a_mongodb_password_reaches_only_the_driver_by_url_and_by_secret_block(
    prefect_server, server, tmp_path, monkeypatch
) -> None:
    from prefect.blocks.system import Secret

    fake, given = server
    monkeypatch.chdir(tmp_path)
    write_marked_archive(tmp_path / "archive.jsonl")
    (tmp_path / "project-config.yaml").write_text(
        "org_id: acme\nproject_id: travel\nmemory:\n  embedding:\n    model: hashing-128\n"
    )
    url = f"mongodb://ops:{PASSWORD}@mongomock:27017/secrets"
    runner = CliRunner()
    printed: list[str] = []

    def mempipe(*args: str, expect: int = 0) -> str:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        printed.append(f"{result.stdout}\n{result.stderr}")
        assert result.exit_code == expect, printed[-1]
        return result.stdout

    store = ["--store", url]
    mempipe(
        "backfill", "archive.jsonl", "--user-id", USER, "--identity", "record", *store, "--json"
    )
    mempipe("promote", *store)
    mempipe("replay", "--audit-dir", "audit", *store)
    mempipe("reembed", "--incremental", *store)
    mempipe("report", "--out", "report", "--html", "page.html", *store)
    mempipe("search", "locker code", "--user-id", USER, "--mode", "text", *store)
    mempipe("copy", "--to", f"sqlite:///{tmp_path / 'copy.db'}", *store)
    for command in ("stats", "runs", "recover", "migrate", "rebuild-indexes", "models"):
        mempipe(command, *store, "--json")

    Secret(value=url).save("mempipe-test-store", overwrite=True)
    monkeypatch.delenv("MEMPIPE_STORE_PASSWORD", raising=False)
    for name in [n for n in os.environ if n.startswith(KEPT_PREFIX)]:
        monkeypatch.delenv(name)  # what the commands above kept: the block alone must do
    stats = json.loads(mempipe("stats", "--store-secret", "mempipe-test-store", "--json"))
    assert stats["turns"] == 5
    deployed = backfill_flow(
        paths=[str(tmp_path / "archive.jsonl")],
        user_id=USER,
        identity="record",
        store_secret="mempipe-test-store",
        config=str(tmp_path / "project-config.yaml"),
    )
    assert deployed.duplicates_skipped == 5, "the run found the store the Secret block names"
    assert deployed.store == "mongodb://ops:***@mongomock:27017/secrets"
    assert given, "every store was opened with the password"

    everywhere = [
        *hits_in_database(prefect_database(), [PASSWORD]),
        *hits_in_text("the store", documents(fake), [PASSWORD]),
        *hits_in_files(tmp_path, [PASSWORD]),
        *(hit for text in printed for hit in hits_in_text("output", text, [PASSWORD])),
    ]
    assert everywhere == []
    shown = hits_in_database(prefect_database(), ["mongodb://ops:***@mongomock:27017/secrets"])
    assert f"{prefect_database().name}:flow_run" in {hit.split(": ")[0] for hit in shown}, (
        "the flow runs' parameters hold the store, without its password"
    )

    assert MARK in documents(fake)
    mempipe("erase", "--user-id", USER, "--yes", "--audit-dir", "audit", *store)
    mempipe("erase", "--user-id", USER, "--yes", "--store", f"sqlite:///{tmp_path / 'copy.db'}")
    assert hits_in_text("the store", documents(fake), [MARK]) == []
    assert hits_in_files(tmp_path, [MARK], skip=[tmp_path / "archive.jsonl"]) == []
    assert hits_in_database(prefect_database(), [MARK]) == []


def test_a_secret_block_that_is_not_there_is_a_config_error_before_anything_runs(
    prefect_server, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["stats", "--store-secret", "no-such-block", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["kind"] == "config"
    assert "no Prefect Secret block named 'no-such-block'" in result.stderr
    assert list(tmp_path.iterdir()) == [], "no default store was created"
