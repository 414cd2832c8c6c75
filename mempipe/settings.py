"""Layered settings: arguments over environment over ``project-config.yaml`` over defaults."""

from __future__ import annotations

import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from mempipe.domain.failures import RetryPolicy
from mempipe.errors import ConfigError
from mempipe.schemas.batch import BatchLimits
from mempipe.schemas.config import ProjectConfig
from mempipe.schemas.errors import describe
from mempipe.schemas.replay import LLMSettings

DEFAULT_STORE = "sqlite:///mempipe.db"
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
    """The OpenAI-compatible provider of the ``openai`` extractor and the ``openai:`` embedding
    models (``OPENAI_API_KEY`` stands for the key where ``MEMPIPE_LLM_API_KEY`` is not set)."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_LLM_", extra="ignore")

    base_url: str | None = Field(
        default=None, description="the endpoint (none: OpenAI's, https://api.openai.com/v1)"
    )
    model: str = Field(default="gpt-4o-mini", description="the chat model the extractor asks")
    api_key: SecretStr | None = Field(
        default=None, description="the key (or OPENAI_API_KEY); OpenAI's endpoint needs one"
    )
    timeout_seconds: float = Field(default=60.0, description="every chat and embeddings call")
    requests_per_minute: float | None = Field(
        default=None, description="the budget of requests per endpoint and model (none: no limit)"
    )
    tokens_per_minute: float | None = Field(
        default=None, description="the budget of tokens per endpoint and model (none: no limit)"
    )
    rate_limit: str | None = Field(
        default=None, description="a Prefect global rate limit to draw on instead, by name"
    )


class ServerSettings(BaseSettings):
    """``MEMPIPE_SERVER_MODE`` and ``MEMPIPE_SERVER_IDLE_SECONDS``: the Prefect API a command
    reports to when ``PREFECT_API_URL`` names none. ``session`` (the default): mempipe's server
    for a session of commands, started by the first and reused by the next, stopping itself
    after the idle time; ``temporary``: Prefect's own temporary server, started and stopped
    by each command."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_SERVER_", extra="ignore")

    mode: Literal["session", "temporary"] = Field(
        default="session",
        description="session: mempipe's server, shared by the commands after; temporary: "
        "Prefect's own, one per command",
    )
    idle_seconds: float = Field(
        default=900.0, gt=0, description="idle time after which the session server stops itself"
    )


def load_batch_limits() -> BatchLimits:
    """The batch limits, each from ``MEMPIPE_BATCH_<FIELD>`` where set."""
    return from_environment(BatchLimits, BATCH_ENV_PREFIX)


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


class ProcessEnvironment(BaseSettings):
    """What a process reads of its environment besides its store and configuration."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_", extra="ignore")

    store_password: SecretStr | None = Field(
        default=None, description="the password of a store whose URL names only its user"
    )
    enabled_extractions: str | None = Field(
        default=None,
        description="the handlers to extract, comma-separated, over memory.extraction.enabled "
        "(the memory platform's MONGOMEM_ENABLED_EXTRACTIONS where it is not set)",
    )
    local_device: str = Field(
        default="cpu",
        pattern=r"^(cpu|cuda(:\d+)?|mps)$",
        description="where the local model computes: cpu, cuda, cuda:<n> or mps",
    )
    traceback: bool = Field(
        default=False, description="print the traceback of an unexpected error on stderr"
    )
    no_watchdog: bool = Field(
        default=False,
        description="internal: set by mempipe on its own watchdog process (it watches no other)",
    )


class MongoEnvironment(BaseSettings):
    """How a MongoDB store is reached and waited for."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_MONGODB_", extra="ignore")

    database: str = Field(default="mempipe", description="the database, where a URL names none")
    timeout_seconds: float = Field(
        default=10.0, gt=0, description="how long a server is looked for before it is down"
    )
    index_timeout: float = Field(
        default=600.0, gt=0, description="the longest wait for a search index, in seconds"
    )
    index_poll: float = Field(
        default=5.0, gt=0, description="how often a search index's state is asked, in seconds"
    )
    sync_window: float = Field(
        default=120.0,
        ge=0,
        description="how far the search index may lag writes, in seconds: memories written "
        "this recently are compared directly in reconciliation",
    )
    exact_scan_limit: int = Field(
        default=20_000,
        gt=0,
        description="how many of an owner's memories of a type reconciliation compares by "
        "exact scan where the server has no vector search",
    )


class SqliteEnvironment(BaseSettings):
    """The SQLite store's own settings."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_SQLITE_", extra="ignore")

    check_max_bytes: int = Field(
        default=512 << 20,
        ge=0,
        description="a store file up to this size is checked whole when a process first opens it",
    )


def process_environment() -> ProcessEnvironment:
    try:
        return ProcessEnvironment()
    except ValidationError as exc:
        raise ConfigError(environment_error("MEMPIPE_", ProcessEnvironment, exc)) from exc


def environment_error(prefix: str, model: type[BaseModel], exc: ValidationError) -> str:
    """``MEMPIPE_LOCAL_DEVICE='gpu0': cpu, cuda, cuda:<n> or mps``: each variable refused,
    with its value and what it takes."""
    said = []
    for error in exc.errors():
        name = str(error["loc"][0])
        field = model.model_fields.get(name)
        if field is None:
            said.append(f"{prefix}{name.upper()}: no such setting (the reference lists them)")
        else:
            given = f"{prefix}{name.upper()}={error.get('input')!r}"
            said.append(f"{given}: {error['msg']} ({field.description})")
    return "; ".join(said)


def load_local_device() -> str:
    """Where the local model computes: ``MEMPIPE_LOCAL_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``,
    ``mps``, as torch names them), ``cpu`` by default; another than the CPU also skips the
    numpy path of a process's first texts, which only ever runs on the CPU."""
    return process_environment().local_device


RETRY_ENV_PREFIX = "MEMPIPE_RETRY_"
BATCH_ENV_PREFIX = "MEMPIPE_BATCH_"

M = TypeVar("M", bound=BaseModel)


def from_environment(model: type[M], prefix: str) -> M:
    """``model`` with each field from ``<prefix><FIELD>`` where set; a variable under the
    prefix that names no field is an error, not a silent default."""
    given = {
        name.removeprefix(prefix).lower(): value
        for name, value in os.environ.items()
        if name.startswith(prefix)
    }
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        raise ConfigError(environment_error(prefix, model, exc)) from exc


def load_retry_policy() -> RetryPolicy:
    """The provider retry policy, each bound from ``MEMPIPE_RETRY_<FIELD>`` where set."""
    return from_environment(RetryPolicy, RETRY_ENV_PREFIX)


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
    enabled = process_environment().enabled_extractions or os.environ.get(
        PLATFORM_ENABLED_EXTRACTIONS_ENV
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


def _environment() -> list[tuple[str, type[BaseModel]]]:
    """Every ``MEMPIPE_*`` variable a process reads, by the model that declares it."""
    from mempipe.archives.limits import ArchiveLimits

    return [
        ("MEMPIPE_", Settings),
        ("MEMPIPE_", ProcessEnvironment),
        ("MEMPIPE_LLM_", LLMEnvironment),
        (RETRY_ENV_PREFIX, RetryPolicy),
        (BATCH_ENV_PREFIX, BatchLimits),
        ("MEMPIPE_SERVER_", ServerSettings),
        ("MEMPIPE_ARCHIVE_", ArchiveLimits),
        ("MEMPIPE_MONGODB_", MongoEnvironment),
        ("MEMPIPE_SQLITE_", SqliteEnvironment),
    ]


def environment_variables() -> list[str]:
    return [
        f"{prefix}{name.upper()}" for prefix, model in _environment() for name in model.model_fields
    ]


def environment_reference() -> str:
    """The configuration reference's table of environment variables, made from the models
    that read them: each variable, its type, its default and what it sets."""
    rows = ["| variable | type | default | what it sets |", "| --- | --- | --- | --- |"]
    for prefix, model in _environment():
        for name, field in model.model_fields.items():
            rows.append(
                f"| `{prefix}{name.upper()}` | {_type_name(field.annotation)} | "
                f"{_default_text(field.default)} | {field.description or ''} |"
            )
    return "\n".join(rows) + "\n"


def _type_name(annotation: Any) -> str:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return " or ".join(f"`{a}`" for a in typing.get_args(annotation))
    if args and typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return _type_name(args[0])
    names = {str: "text", int: "integer", float: "number", bool: "boolean", Path: "path"}
    return names.get(annotation, "secret" if annotation is SecretStr else str(annotation))


def _default_text(default: Any) -> str:
    if default is None:
        return "none"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    return f"`{default}`"
