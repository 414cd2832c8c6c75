"""A store's password stays in the process that connects: everything recorded or printed (flow
parameters, run records, summaries, messages) holds the store's public URL, ``user:***@``.

A password reaches the process three ways: inside the URL given (``--store`` or
``MEMPIPE_STORE``), from ``MEMPIPE_STORE_PASSWORD`` for a URL that names only the user, or from
a Prefect Secret block named at run time (``store_secret``; the block holds the whole URL or
only the password). Whichever it was, the process keeps it in its own environment, under a
name derived from the public URL, where the worker processes a run starts (Dask) find it too;
:func:`connect_url` puts it back only in the URL handed to the driver.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated
from urllib.parse import quote, unquote

from pydantic import AfterValidator, SecretStr

from mempipe.errors import ConfigError
from mempipe.redaction import KEPT_PREFIX, KEY_PREFIX, PASSWORD_ENV, REDACTED, scrub
from mempipe.schemas.embedding import ModelEndpoint

if TYPE_CHECKING:
    from mempipe.schemas.replay import LLMSettings

_USERINFO = re.compile(
    r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@?#]+)(?::(?P<pw>[^@/?#]*))?@"
)


def public_url(url: str) -> str:
    """The URL as it may be shown and recorded: its password, if any, replaced by ``***``."""
    match = _USERINFO.match(url)
    return url if match is None or match["pw"] is None else _key(url)


def remember(url: str) -> str:
    """Keep ``url``'s password in this process and hand back the public URL to pass on."""
    match = _USERINFO.match(url)
    if match is not None and match["pw"] not in (None, REDACTED):
        os.environ[_kept_name(url)] = unquote(match["pw"])
    return public_url(url)


def remember_secret(value: str, store: str | None, name: str) -> str:
    """A Secret block's value as the store's public URL: the block holds the whole URL, or
    the password of the user that ``store`` names."""
    if "://" in value:
        if store is not None and _key(store) != _key(value):
            raise ConfigError(
                f"Secret block {name!r} holds the URL {public_url(value)}, "
                f"not the store given ({public_url(store)})"
            )
        return remember(value)
    if store is None or _USERINFO.match(store) is None:
        raise ConfigError(
            f"Secret block {name!r} holds a password: give the store's URL with its user "
            "(mongodb://USER@HOST/DATABASE) as the store"
        )
    os.environ[_kept_name(store)] = value
    return _key(store)


def connect_url(url: str) -> str:
    """The URL to connect with: the password this process keeps for the public URL, else
    ``MEMPIPE_STORE_PASSWORD`` for a URL that names a user."""
    match = _USERINFO.match(url)
    if match is None or match["pw"] not in (None, REDACTED):
        return url
    password = os.environ.get(_kept_name(url)) or os.environ.get(PASSWORD_ENV)
    if password:
        return f"{match['head']}{match['user']}:{quote(password, safe='')}@{url[match.end() :]}"
    if match["pw"] == REDACTED:
        raise ConfigError(
            f"no password for {url}: set {PASSWORD_ENV}, or name a Prefect Secret block that "
            "holds it (--store-secret / store_secret)"
        )
    return url


def load_store_secret(name: str, store: str | None) -> str:
    """The store's public URL, its password read from the Prefect Secret block ``name`` at run
    time (never templated into a deployment, where Prefect would store the value)."""
    return remember_secret(_secret_text(name, "a store URL or a password"), store, name)


def _secret_text(name: str, holds: str) -> str:
    """The text a Prefect Secret block holds, read at run time."""
    from prefect.blocks.system import Secret

    try:
        block = Secret.load(name, _sync=True)  # type: ignore[call-arg]
    except ValueError as exc:
        raise ConfigError(
            f"no Prefect Secret block named {name!r}: create it first (docs/operations/secrets.md)"
        ) from exc
    value = block.get()
    if not isinstance(value, str) or not value:
        raise ConfigError(f"Secret block {name!r} holds no text: {holds}")
    return value


ENDPOINT_PREFIX = "MEMPIPE_ENDPOINT_"


def keep_endpoints(endpoints: Mapping[str, ModelEndpoint]) -> None:
    """The project's embedding endpoints kept in this process's environment, where a run's
    worker processes (Dask) find them too; a key named by its variable is kept at once under a
    name the scrubber knows, a Secret block's when it is first read."""
    for model_id, endpoint in endpoints.items():
        os.environ[_model_name(ENDPOINT_PREFIX, model_id)] = endpoint.model_dump_json()
        if endpoint.api_key_env and os.environ.get(endpoint.api_key_env):
            os.environ[_model_name(KEY_PREFIX, model_id)] = os.environ[endpoint.api_key_env]


def endpoint_settings(settings: LLMSettings, *model_ids: str) -> LLMSettings:
    """``settings`` at the endpoint and with the key of the first of ``model_ids`` that has
    an endpoint of its own; as they are for a model that has none."""
    for model_id in model_ids:
        declared = os.environ.get(_model_name(ENDPOINT_PREFIX, model_id))
        if declared is not None:
            endpoint = ModelEndpoint.model_validate_json(declared)
            key = SecretStr(_model_key(model_id, endpoint))
            return settings.model_copy(update={"base_url": endpoint.base_url, "api_key": key})
    return settings


def _model_key(model_id: str, endpoint: ModelEndpoint) -> str:
    kept = _model_name(KEY_PREFIX, model_id)
    if os.environ.get(kept):
        return os.environ[kept]
    if endpoint.api_key_env:
        raise ConfigError(
            f"{model_id}: its key is read from {endpoint.api_key_env}, which is not set "
            "(memory.embedding.endpoints)"
        )
    if endpoint.api_key_secret:
        os.environ[kept] = _secret_text(endpoint.api_key_secret, "a key")
        return os.environ[kept]
    return ""


def _model_name(prefix: str, model_id: str) -> str:
    return prefix + hashlib.sha256(model_id.encode()).hexdigest()[:16].upper()


def _key(url: str) -> str:
    """The URL with ``user:***@``: how it is shown, and the name its password is kept under."""
    match = _USERINFO.match(url)
    if match is None:
        return url
    return f"{match['head']}{match['user']}:{REDACTED}@{url[match.end() :]}"


def _kept_name(url: str) -> str:
    return KEPT_PREFIX + hashlib.sha256(_key(url).encode()).hexdigest()[:16].upper()


NoCredentials = Annotated[str, AfterValidator(scrub)]
"""Text that is recorded (an error's message): any credential the process knows is ``***``."""
