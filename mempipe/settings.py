"""Layered settings: arguments over environment over ``project-config.yaml`` over defaults."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from mempipe.domain.failures import RetryPolicy
from mempipe.errors import ConfigError
from mempipe.schemas.batch import BatchLimits
from mempipe.schemas.config import ProjectConfig
from mempipe.schemas.errors import describe
from mempipe.schemas.replay import LLMSettings

DEFAULT_STORE = "sqlite:///mempipe.db"
ENABLED_EXTRACTIONS_ENV = "MEMPIPE_ENABLED_EXTRACTIONS"
PLATFORM_ENABLED_EXTRACTIONS_ENV = "MONGOMEM_ENABLED_EXTRACTIONS"
"""The name the memory platform delivers the list under (DESIGN), read where mempipe's own is
not set."""


class Settings(BaseSettings):
    """Process-level settings, read from ``MEMPIPE_*`` variables when not given."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_", extra="forbid")

    store: str = Field(default=DEFAULT_STORE, description="store URL: sqlite:///path.db")
    store_secret: str | None = Field(
        default=None,
        description="a Prefect Secret block holding the store URL, or its password",
    )
    config: Path = Field(
        default=Path("project-config.yaml"), description="project configuration file"
    )
    org_id: str | None = Field(default=None, description="default org for records lacking one")
    project_id: str | None = Field(default=None, description="default project likewise")


class LLMEnvironment(BaseSettings):
    """``MEMPIPE_LLM_BASE_URL``, ``MEMPIPE_LLM_MODEL``, ``MEMPIPE_LLM_API_KEY`` (or
    ``OPENAI_API_KEY``), ``MEMPIPE_LLM_TIMEOUT_SECONDS``, ``MEMPIPE_LLM_REQUESTS_PER_MINUTE``,
    ``MEMPIPE_LLM_TOKENS_PER_MINUTE``,
    ``MEMPIPE_LLM_RATE_LIMIT`` (the name of a Prefect global rate limit)."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_LLM_", extra="ignore")

    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key: SecretStr | None = None
    timeout_seconds: float = 60.0
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    rate_limit: str | None = None


class ServerSettings(BaseSettings):
    """``MEMPIPE_SERVER_MODE`` and ``MEMPIPE_SERVER_IDLE_SECONDS``: the Prefect API a command
    reports to when ``PREFECT_API_URL`` names none. ``session`` (the default): mempipe's server
    for a session of commands, started by the first and reused by the next, stopping itself
    after the idle time; ``temporary``: Prefect's own temporary server, started and stopped
    by each command."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_SERVER_", extra="ignore")

    mode: Literal["session", "temporary"] = "session"
    idle_seconds: float = Field(default=900.0, gt=0)


class BatchEnvironment(BaseSettings):
    """``MEMPIPE_BATCH_MAX_REQUESTS``, ``_MAX_BYTES``, ``_MAX_EMBEDDING_INPUTS`` (a file's
    limits), ``_POLL_FIRST_SECONDS``, ``_POLL_MAX_SECONDS`` (how a run follows its batches)."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_BATCH_", extra="ignore")

    max_requests: int | None = None
    max_bytes: int | None = None
    max_embedding_inputs: int | None = None
    poll_first_seconds: float | None = None
    poll_max_seconds: float | None = None


def load_batch_limits() -> BatchLimits:
    given = BatchEnvironment().model_dump(exclude_none=True)
    try:
        return BatchLimits.model_validate(given)
    except ValidationError as exc:
        raise ConfigError(f"MEMPIPE_BATCH_*: {describe(exc, with_input=True)}") from exc


def load_llm_settings() -> LLMSettings:
    env = LLMEnvironment()
    key = env.api_key or SecretStr(os.environ.get("OPENAI_API_KEY", ""))
    return LLMSettings(
        base_url=env.base_url,
        model=env.model,
        api_key=key,
        timeout_seconds=env.timeout_seconds,
        requests_per_minute=env.requests_per_minute,
        tokens_per_minute=env.tokens_per_minute,
        rate_limit=env.rate_limit,
    )


LOCAL_DEVICE_ENV = "MEMPIPE_LOCAL_DEVICE"


def load_local_device() -> str:
    """Where the local model computes: ``MEMPIPE_LOCAL_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``,
    ``mps``, as torch names them), ``cpu`` by default; another than the CPU also skips the
    numpy path of a process's first texts, which only ever runs on the CPU."""
    device = os.environ.get(LOCAL_DEVICE_ENV, "cpu").strip() or "cpu"
    if not re.fullmatch(r"cpu|cuda(?::\d+)?|mps", device):
        raise ConfigError(f"{LOCAL_DEVICE_ENV}={device!r}: cpu, cuda, cuda:<n> or mps")
    return device


RETRY_ENV_PREFIX = "MEMPIPE_RETRY_"


def load_retry_policy() -> RetryPolicy:
    """The provider retry policy, each bound from ``MEMPIPE_RETRY_<FIELD>`` where set
    (``MEMPIPE_RETRY_MAX_ATTEMPTS``, ``_MAX_SECONDS``, ``_RETRY_AFTER_CAP``, ``_NETWORK_BASE``,
    ``_NETWORK_CAP``, ``_RATE_LIMIT_DEFAULT``, ``_BREAKER_FAILURES``); an unknown one is an
    error, not a silent default."""
    given = {
        name.removeprefix(RETRY_ENV_PREFIX).lower(): value
        for name, value in os.environ.items()
        if name.startswith(RETRY_ENV_PREFIX)
    }
    try:
        return RetryPolicy.model_validate(given)
    except ValidationError as exc:
        raise ConfigError(f"{RETRY_ENV_PREFIX}*: {describe(exc, with_input=True)}") from exc


def load_settings(**overrides: Any) -> Settings:
    """Settings with explicit arguments winning; None means "not given"."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {describe(exc, with_input=True)}") from exc


def load_project_config(path: Path | None) -> ProjectConfig:
    """Read ``project-config.yaml`` (absent file: defaults), then apply environment overrides."""
    data: dict[str, Any] = {}
    if path is not None and path.exists():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
    enabled = os.environ.get(
        ENABLED_EXTRACTIONS_ENV, os.environ.get(PLATFORM_ENABLED_EXTRACTIONS_ENV)
    )
    if enabled is not None:
        memory = data.setdefault("memory", {}) or {}
        data["memory"] = memory
        extraction = memory.setdefault("extraction", {}) or {}
        memory["extraction"] = extraction
        extraction["enabled"] = [item.strip() for item in enabled.split(",") if item.strip()]
    try:
        config = ProjectConfig.model_validate(data)
    except ValidationError as exc:
        where = path if path is not None else "configuration"
        raise ConfigError(f"{where}: {describe(exc, with_input=True)}") from exc
    return read_prompt_files(config, path.parent if path is not None else Path.cwd())


def read_prompt_files(config: ProjectConfig, base: Path) -> ProjectConfig:
    """Each prompt given as a file read now, relative to the configuration's folder, so that
    what travels to a task is the prompt's text."""
    prompts = dict(config.memory.extraction.prompts)
    for handler, prompt in prompts.items():
        if prompt.text is None and prompt.file is not None:
            path = base / prompt.file
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"the {handler} prompt file {path}: {exc.strerror}") from exc
            if not text.strip():
                raise ConfigError(f"the {handler} prompt file {path} is empty")
            prompts[handler] = prompt.model_copy(update={"text": text})
    extraction = config.memory.extraction.model_copy(update={"prompts": prompts})
    memory = config.memory.model_copy(update={"extraction": extraction})
    return config.model_copy(update={"memory": memory})
