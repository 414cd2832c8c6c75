"""The embedding registry: which model serves each collection, and the models there are."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from mempipe.domain.bridge import POOR_FIT
from mempipe.schemas.choices import OneOf
from mempipe.schemas.memory import MEMORY_COLLECTIONS

COLLECTIONS = ("stm", *MEMORY_COLLECTIONS)
"""Everything that carries vectors: the turns, and each long-term memory collection."""


def _known_collection(name: str) -> str:
    if name not in COLLECTIONS:
        raise ValueError(f"unknown collection {name!r}; known: {', '.join(COLLECTIONS)}")
    return name


CollectionName = Annotated[str, AfterValidator(_known_collection), OneOf(lambda: list(COLLECTIONS))]
"""A collection's name, as a parameter: checked, and listed in the parameter's schema."""


RequestValue = str | int | float | bool


class SideOptions(BaseModel):
    """How one side (query or document) of a model is asked for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: str = Field(default="", description="put before each text (E5: 'query: ')")
    fields: dict[str, RequestValue] = Field(
        default_factory=dict, description="request fields of this side (input_type: query)"
    )


class ModelOptions(BaseModel):
    """A provider model's options, as the project configuration declares them
    (``memory.embedding.options``, by model id): what each side sends, the fields every request
    carries (Voyage's ``output_dimension`` / ``output_dtype``), and the name the provider gives
    its dimension parameter (``None``: the model has one size and takes none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: SideOptions = Field(default_factory=SideOptions)
    document: SideOptions = Field(default_factory=SideOptions)
    fields: dict[str, RequestValue] = Field(default_factory=dict)
    dimensions_parameter: str | None = "dimensions"
    matryoshka: bool = Field(
        default=False,
        description="its vector at N dimensions is its first N values, renormalized (OpenAI's "
        "text-embedding-3-*, voyage-3.5): a smaller size is cut from stored vectors",
    )

    @property
    def symmetric(self) -> bool:
        return self.query == self.document


class ModelEndpoint(BaseModel):
    """Where an ``openai:`` embedding model is asked, and where its key comes from: the name of
    an environment variable or of a Prefect Secret block, never the key itself. A model with no
    endpoint of its own is asked at the extractor's (``MEMPIPE_LLM_BASE_URL``, its key); one
    with an endpoint and no key source is sent no key — never the extractor's, which belongs to
    another provider."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="the OpenAI-compatible endpoint, https://host/v1")
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the variable holding its key",
    )
    api_key_secret: str | None = Field(
        default=None, description="the Prefect Secret block holding its key"
    )

    @model_validator(mode="after")
    def _one_key_source(self) -> ModelEndpoint:
        if self.api_key_env and self.api_key_secret:
            raise ValueError("name api_key_env or api_key_secret, not both")
        return self


class ModelState(StrEnum):
    SERVING = "serving"
    BUILDING = "building"
    PREVIOUS = "previous"


class ModelRegistration(BaseModel):
    """A (collection, model) pair's vectors, as a store is asked to declare them."""

    model_config = ConfigDict(frozen=True)

    collection: str
    model_id: str
    dimensions: int
    state: ModelState
    options: ModelOptions | None = Field(
        default=None, description="how the model was asked (a provider model's declared options)"
    )


class RegistryEntry(ModelRegistration):
    """A registration as the store keeps it, with the table (or field) its vectors are in."""

    vector_table: str


class Bridge(BaseModel):
    """A map from ``query_model``'s query vectors into the space of the vectors that serve
    ``collection`` (``serving_model``'s), fitted on ``pairs`` records
    (:mod:`mempipe.domain.bridge`): while it lives, a query the serving model cannot embed is
    embedded by ``query_model`` and searched through it. It lives while ``serving_model``
    serves: the switch retires it."""

    collection: str
    serving_model: str
    query_model: str
    kind: str = Field(default="affine", description="the map's kind (domain.bridge)")
    sample: int = Field(description="the records asked for, drawn with seed")
    pairs: int = Field(description="the records it was fitted on: those with both vectors")
    seed: int
    source_dims: int = Field(description="the query model's dimensions")
    target_dims: int = Field(description="the serving model's dimensions")
    held_out_cosine: float = Field(
        description="mean cosine of mapped and stored vectors on a tenth held out of the fit"
    )
    fitted_at: datetime
    weights: bytes = Field(exclude=True, repr=False, description="float32, little-endian")

    @property
    def poor(self) -> str | None:
        """Why this bridge would serve badly, where it would."""
        if self.held_out_cosine >= POOR_FIT:
            return None
        return (
            f"the bridge from {self.query_model} into {self.serving_model}'s vectors carries "
            f"vectors poorly (held-out cosine {self.held_out_cosine:.3f}, under {POOR_FIT}): "
            "searches through it will find much less than the serving model did"
        )

    @property
    def asked(self) -> tuple[str, int, str, int, int]:
        """What a fit was asked: a move resumed with the same reuses the bridge it kept."""
        return self.serving_model, self.target_dims, self.query_model, self.sample, self.seed


class BridgeUse(BaseModel):
    """A search answered through a bridge: said in ``--json`` and as a warning, never silently."""

    collection: str
    serving_model: str
    query_model: str
    reason: str = Field(description="why the serving model could not embed the query")

    @property
    def warning(self) -> str:
        return (
            f"{self.collection}: answered through the bridge from {self.query_model} into "
            f"{self.serving_model}'s vectors ({self.serving_model} failed: {self.reason})"
        )


class ModelInfo(BaseModel):
    """A model mempipe can use, as `mempipe models --json` lists it."""

    id: str
    dimensions: int
    active: bool = Field(description="serving at least one collection of this store")
    collections: list[str] = Field(default_factory=list)
    bridges: list[Bridge] = Field(
        default_factory=list, description="bridges into this model's vectors, one a collection"
    )
