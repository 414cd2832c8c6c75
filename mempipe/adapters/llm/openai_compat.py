"""The LLM extractor over any OpenAI-compatible endpoint, through the ``openai`` client.

Structured output: the response format is the JSON schema of the handler's memory type (with
``json_object`` as a fallback for servers that reject schemas). Output that does not validate is
sent back once for repair. The answer itself is validated first (``schemas.provider``): a body
that is not the API's JSON, or has no choices, is the provider's failure (``invalid_response``).
The client's own retries are off: errors are translated into mempipe's failure kinds, and the
retry policy (domain/failures.py) decides.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError, create_model

from mempipe.adapters.llm.answers import invalid_response, validated
from mempipe.adapters.llm.base import ExtractorCapabilities
from mempipe.adapters.llm.guard import ProviderGuard
from mempipe.adapters.llm.prompts import JUDGE, REPAIR, SUMMARY, prompt_for
from mempipe.adapters.llm.ratelimit import limiter
from mempipe.adapters.llm.tokens import ChatMessage, chat_counter, chat_tokens
from mempipe.domain.failures import ContentError, FailureKind
from mempipe.domain.reconcile import Candidate, Verdict
from mempipe.errors import ConfigError
from mempipe.schemas.costs import RequestKind
from mempipe.schemas.errors import describe
from mempipe.schemas.extraction import EXTRACTED_MODELS, Extracted
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.prompts import Prompt
from mempipe.schemas.provider import ChatCompletion
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.transcript import SnapshotContent

if TYPE_CHECKING:
    import openai

CHAT_ENDPOINT = "/v1/chat/completions"


def output_model(memory_type: MemoryType) -> type[BaseModel]:
    return create_model(
        f"{memory_type.value.title()}Memories", memories=(list[EXTRACTED_MODELS[memory_type]], ...)
    )


OPENAI_ENDPOINT = "https://api.openai.com/v1"
_DESCRIBING: ContextVar[bool] = ContextVar("mempipe_describing_providers", default=False)


@contextmanager
def describing_only() -> Iterator[None]:
    """Providers built in this block are only described (a model's name and dimensions, for a
    command's early check or a plan) and send nothing: they need no key."""
    token = _DESCRIBING.set(True)
    try:
        yield
    finally:
        _DESCRIBING.reset(token)


def openai_client(settings: LLMSettings, what: str) -> openai.OpenAI:
    """The ``openai`` client of an endpoint, its own retries off: mempipe's retry policy
    decides by failure class. OpenAI's own endpoint without a key is a setup error naming the
    settings, before any request (an endpoint of one's own, ``MEMPIPE_LLM_BASE_URL``, may take
    none). ``openai`` is imported here, by the first provider a run builds: a job with the
    offline extractor and a local model never loads it (0.7 s of a command's start)."""
    import openai

    key = settings.api_key.get_secret_value()
    endpoint = settings.base_url or OPENAI_ENDPOINT
    if not key and "api.openai.com" in endpoint and not _DESCRIBING.get():
        raise ConfigError(
            f"{what} at {endpoint} needs an API key: set MEMPIPE_LLM_API_KEY (or "
            "OPENAI_API_KEY); nothing was sent. An endpoint of your own that takes none: "
            "MEMPIPE_LLM_BASE_URL"
        )
    return openai.OpenAI(
        base_url=settings.base_url,
        api_key=key or "unset",
        timeout=settings.timeout_seconds,
        max_retries=0,
    )


def extraction_messages(snapshot: SnapshotContent, prompt: Prompt) -> list[dict[str, str]]:
    """The chat request of one extraction (its response format aside): what a plan counts and
    a batch file holds, the same as a live request sends."""
    return [
        {"role": "system", "content": prompt.text or ""},
        {"role": "user", "content": snapshot.transcript()},
    ]


def summary_messages(snapshot: SnapshotContent) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SUMMARY},
        {"role": "user", "content": snapshot.transcript()},
    ]


class OpenAIExtractor:
    capabilities = ExtractorCapabilities(summaries=True, judge=True, prompts=True)

    def __init__(self, settings: LLMSettings, client: openai.OpenAI | None = None) -> None:
        self.settings = settings
        self.name = f"openai:{settings.model}"
        self._client = client or openai_client(settings, f"the openai extractor ({settings.model})")
        self._guard = ProviderGuard(
            str(self._client.base_url),
            settings.model,
            limiter(settings, str(self._client.base_url)),
        )
        self._counter = chat_counter(settings.model) if settings.tokens_per_minute else None
        self._schemas_supported = True

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]:
        messages = extraction_messages(snapshot, prompt_for(self.settings, memory_type))
        answer = self._complete(messages, output_model(memory_type), "extraction", memory_type)
        return self.memories_from(messages, answer, memory_type)

    def memories_from(
        self, messages: list[dict[str, str]], answer: str, memory_type: MemoryType
    ) -> list[Extracted]:
        """The memories of an extraction's answer (a live one, or a batch line's); output that
        does not validate is sent back once for repair, live."""
        model = output_model(memory_type)
        try:
            return list(model.model_validate_json(answer).memories)  # type: ignore[attr-defined]
        except ValidationError as first:
            messages = [
                *messages,
                {"role": "assistant", "content": answer},
                {"role": "user", "content": REPAIR.format(problem=describe(first))},
            ]
        answer = self._complete(messages, model, "extraction", memory_type)
        try:
            return list(model.model_validate_json(answer).memories)  # type: ignore[attr-defined]
        except ValidationError as second:
            raise ContentError(
                FailureKind.INVALID_OUTPUT,
                f"output does not validate after one repair: {describe(second)}",
            ) from second

    def request_body(
        self, messages: list[dict[str, str]], model: type[BaseModel] | None
    ) -> dict[str, Any]:
        """One chat request, the same live and in a batch file."""
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "temperature": 0,
        }
        if model is not None:
            body["response_format"] = self._response_format(model)
        return body

    def answer_content(self, body: object, kind: RequestKind, memory_type: str | None) -> str:
        """The text of a chat completion's body (a batch line's), validated as a live answer is,
        its usage counted; a refusal is the content's failure."""
        try:
            completion = ChatCompletion.model_validate(body)
        except ValidationError as exc:
            raise invalid_response(
                f"{self.name} chat completion: the answer is not of the API's shape: "
                f"{describe(exc)}"
            ) from exc
        self._guard.spent(kind, completion.usage, memory_type, via="batch")
        return _content(completion)

    def summarize(self, snapshot: SnapshotContent) -> str:
        summary = self._complete(summary_messages(snapshot), None, "summary").strip()
        if not summary:
            raise ContentError(FailureKind.INVALID_OUTPUT, "the model returned an empty summary")
        return summary

    def judge(self, text: str, existing: Candidate) -> Verdict:
        """The model's verdict; anything but one of the three words is taken as ADD, so that
        nothing is overwritten on an unclear answer."""
        prompt = JUDGE.format(existing=existing.text, new=text)
        answer = self._complete([{"role": "user", "content": prompt}], None, "judge")
        answer = answer.strip().upper()
        return Verdict(answer) if answer in set(Verdict) else Verdict.ADD

    def _complete(
        self,
        messages: list[dict[str, str]],
        model: type[BaseModel] | None,
        kind: RequestKind,
        memory_type: str | None = None,
    ) -> str:
        tokens = (
            chat_tokens(self._counter, [ChatMessage(**m) for m in messages])
            if self._counter is not None
            else 0
        )

        def send() -> str:
            raw = self._client.chat.completions.with_raw_response.create(
                **self.request_body(messages, model)
            )
            completion = validated(raw, ChatCompletion, f"{self.name} chat completion")
            self._guard.spent(kind, completion.usage, memory_type)
            return _content(completion)

        try:
            return self._guard.send(send, tokens)
        except ContentError as exc:
            unsupported = exc.kind is FailureKind.BAD_REQUEST and "response_format" in str(exc)
            if model is not None and self._schemas_supported and unsupported:
                self._schemas_supported = False
                return self._complete(messages, model, kind, memory_type)
            raise

    def _response_format(self, model: type[BaseModel]) -> dict[str, Any]:
        if not self._schemas_supported:
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": model.__name__, "schema": model.model_json_schema()},
        }


def _content(completion: ChatCompletion) -> str:
    choice = completion.choices[0]
    refusal = choice.message.refusal
    if refusal or choice.finish_reason == "content_filter":
        raise ContentError(FailureKind.REFUSAL, f"the model refused: {refusal or 'filtered'}")
    return choice.message.content or ""
