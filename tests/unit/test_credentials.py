"""A store's password is kept in the process and put back only in the URL the driver gets."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator

import pytest

from mempipe import redaction
from mempipe.credentials import (
    ENDPOINT_PREFIX,
    connect_url,
    endpoint_settings,
    keep_endpoints,
    public_url,
    remember,
    remember_secret,
    scrub,
)
from mempipe.domain.failures import FailureKind, failure_error
from mempipe.errors import ConfigError
from mempipe.schemas.failure import Failure

KEPT = (redaction.KEPT_PREFIX, redaction.KEY_PREFIX, ENDPOINT_PREFIX)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The passwords a test keeps go with it."""
    for name in list(os.environ):
        if name.startswith(KEPT) or name in redaction.SECRET_ENVS:
            monkeypatch.delenv(name)
    yield
    for name in [n for n in os.environ if n.startswith(KEPT)]:
        del os.environ[name]


def test_the_public_url_hides_only_the_password() -> None:
    assert public_url("mongodb+srv://ops:s3cr%40t@cluster0.x.net/mp?retryWrites=true") == (
        "mongodb+srv://ops:***@cluster0.x.net/mp?retryWrites=true"
    )
    assert public_url("mongodb://ops@host/mp") == "mongodb://ops@host/mp"
    assert public_url("sqlite:///var/lib/memory.db") == "sqlite:///var/lib/memory.db"


def test_a_remembered_password_comes_back_only_in_the_url_to_connect_with() -> None:
    shown = remember("mongodb://ops:s3cr%40t@host:27017/mp?authSource=admin")
    assert shown == "mongodb://ops:***@host:27017/mp?authSource=admin"
    assert connect_url(shown) == "mongodb://ops:s3cr%40t@host:27017/mp?authSource=admin"
    assert connect_url("mongodb://ops:given@host:27017/mp") == "mongodb://ops:given@host:27017/mp"


def test_a_password_is_kept_per_store() -> None:
    first = remember("mongodb://ops:one@a/mp")
    second = remember("mongodb://ops:two@b/mp")
    assert connect_url(first) == "mongodb://ops:one@a/mp"
    assert connect_url(second) == "mongodb://ops:two@b/mp"


def test_the_environment_route_fills_a_url_that_names_only_the_user(monkeypatch) -> None:
    monkeypatch.setenv("MEMPIPE_STORE_PASSWORD", "p@ss word")
    assert connect_url("mongodb://ops@host/mp") == "mongodb://ops:p%40ss%20word@host/mp"
    assert connect_url("mongodb://host/mp") == "mongodb://host/mp", "no user, no password"


def test_a_hidden_password_nobody_gave_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="no password for mongodb://ops:\\*\\*\\*@host/mp"):
        connect_url("mongodb://ops:***@host/mp")


def test_a_secret_block_holds_the_whole_url_or_the_password_of_the_store_given() -> None:
    assert remember_secret("mongodb://ops:pw1@h/mp", None, "b") == "mongodb://ops:***@h/mp"
    assert connect_url("mongodb://ops:***@h/mp") == "mongodb://ops:pw1@h/mp"
    assert remember_secret("pw2", "mongodb://app@h2/mp", "b") == "mongodb://app:***@h2/mp"
    assert connect_url("mongodb://app:***@h2/mp") == "mongodb://app:pw2@h2/mp"
    with pytest.raises(ConfigError, match="holds a password"):
        remember_secret("pw3", "sqlite:///m.db", "b")
    with pytest.raises(ConfigError, match="not the store given"):
        remember_secret("mongodb://ops:pw1@h/mp", "mongodb://ops@elsewhere/mp", "b")


def test_scrub_removes_every_credential_the_process_knows(monkeypatch) -> None:
    monkeypatch.setenv("MEMPIPE_LLM_API_KEY", "sk-live-abcdef123456")
    remember("mongodb://ops:hunter22@h/mp")
    text = "401 Incorrect API key provided: sk-live-abcdef123456; auth hunter22 at mongodb://x:y@z/"
    assert scrub(text) == "401 Incorrect API key provided: ***; auth *** at mongodb://x:***@z/"


def test_a_recorded_failure_never_holds_a_credential(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-0123456789")
    failure = Failure.model_validate(
        {
            "run_id": "r",
            "step": "extract",
            "failure_class": "environmental",
            "error_type": "credentials",
            "error": "Incorrect API key provided: sk-proj-0123456789.",
            "attempts": 1,
            "at": "2026-01-01T00:00:00Z",
        }
    )
    assert failure.error == "Incorrect API key provided: ***."


KEY = "sk-test-0123456789abcdef"


def test_every_mempipe_error_is_made_without_the_credentials_the_process_knows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMPIPE_LLM_API_KEY", KEY)
    error = failure_error(FailureKind.CREDENTIALS, f"401: Incorrect API key provided: {KEY}.")
    assert KEY not in str(error)
    assert "***" in str(error)
    assert KEY not in str(ConfigError(f"cannot embed: {error}"))


def test_every_log_record_is_scrubbed_message_and_traceback_with_its_causes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The process-wide gate: whatever handler writes a record (stderr, Prefect's API), it gets
    the record scrubbed, the foreign exception a mempipe error was raised from included."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("mempipe.test.scrub")
    logger.addHandler(handler)
    try:
        try:
            try:
                raise RuntimeError(f"the provider echoed {KEY}")
            except RuntimeError as cause:
                raise ConfigError("cannot embed") from cause
        except ConfigError:
            logger.exception("probe failed with %s", KEY)
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "RuntimeError: the provider echoed ***" in written, "the cause's traceback is there"
    assert KEY not in written


def test_an_embedding_models_own_key_is_used_for_it_alone_and_scrubbed(monkeypatch) -> None:
    from pydantic import SecretStr

    from mempipe.schemas.embedding import ModelEndpoint
    from mempipe.schemas.replay import LLMSettings

    monkeypatch.setenv("VOYAGE_KEY", "pa-voyage-0123456789")
    keep_endpoints(
        {
            "openai:voyage-3.5:1024": ModelEndpoint(
                base_url="https://api.voyageai.com/v1", api_key_env="VOYAGE_KEY"
            ),
            "openai:local-e5:384": ModelEndpoint(base_url="http://127.0.0.1:8000/v1"),
        }
    )
    monkeypatch.delenv("VOYAGE_KEY")  # kept: a worker started now finds it all the same
    extractor = LLMSettings(base_url=None, api_key=SecretStr("sk-extractor-0123456789"))

    voyage = endpoint_settings(extractor, "openai:voyage-3.5:1024")
    local = endpoint_settings(extractor, "openai:local-e5:384")
    other = endpoint_settings(extractor, "openai:text-embedding-3-small:1536")

    assert (voyage.base_url, voyage.api_key.get_secret_value()) == (
        "https://api.voyageai.com/v1",
        "pa-voyage-0123456789",
    )
    assert local.api_key.get_secret_value() == "", "never the extractor's key elsewhere"
    assert other == extractor, "a model without an endpoint is asked at the extractor's"
    assert scrub("sent pa-voyage-0123456789") == "sent ***"
