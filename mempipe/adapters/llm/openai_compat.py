"""The LLM extractor over any OpenAI-compatible endpoint, through the ``openai`` client.

Structured output: the response format is the JSON schema of the handler's memory type (with
``json_object`` as a fallback for servers that reject schemas). Output that does not validate is
sent back once for repair. The answer itself is validated first (``schemas.provider``): a body
that is not the API's JSON, or has no choices, is the provider's failure (``invalid_response``).
The client's own retries are off: errors are translated into mempipe's failure kinds, and the
retry policy (domain/failures.py) decides.
"""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime
from typing import Any

import openai
from pydantic import BaseModel, ValidationError, create_model

from mempipe.adapters.llm.answers import invalid_response, validated
from mempipe.adapters.llm.base import ExtractorCapabilities
from mempipe.adapters.llm.prompts import COMMON, JUDGE, PROMPTS, REPAIR, SUMMARY
from mempipe.adapters.llm.ratelimit import limiter
from mempipe.adapters.llm.tokens import ChatMessage, chat_counter, chat_tokens
from mempipe.domain.failures import ContentError, FailureKind, failure_error
from mempipe.domain.reconcile import Candidate, Verdict
from mempipe.errors import MempipeError
from mempipe.schemas.errors import describe
from mempipe.schemas.extraction import EXTRACTED_MODELS, Extracted
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.provider import ChatCompletion
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.transcript import SnapshotContent

CHAT_ENDPOINT = "/v1/chat/completions"
CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window")


def output_model(memory_type: MemoryType) -> type[BaseModel]:
    return create_model(
        f"{memory_type.value.title()}Memories", memories=(list[EXTRACTED_MODELS[memory_type]], ...)
    )


def openai_client(settings: LLMSettings) -> openai.OpenAI:
    """The ``openai`` client of an endpoint, its own retries off: mempipe's retry policy
    decides by failure class."""
    return openai.OpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key.get_secret_value() or "unset",
        timeout=settings.timeout_seconds,
        max_retries=0,
    )


def extraction_messages(snapshot: SnapshotContent, memory_type: MemoryType) -> list[dict[str, str]]:
    """The chat request of one extraction (its response format aside): what a plan counts and
    a batch file holds, the same as a live request sends."""
    return [
        {"role": "system", "content": f"{COMMON}\n\n{PROMPTS[memory_type]}"},
        {"role": "user", "content": snapshot.transcript()},
    ]


def summary_messages(snapshot: SnapshotContent) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SUMMARY},
        {"role": "user", "content": snapshot.transcript()},
    ]


class OpenAIExtractor:
    capabilities = ExtractorCapabilities(summaries=True, judge=True)

    def __init__(self, settings: LLMSettings, client: openai.OpenAI | None = None) -> None:
        self.settings = settings
        self.name = f"openai:{settings.model}"
        self._client = client or openai_client(settings)
        self._limiter = limiter(settings, str(self._client.base_url))
        self._counter = chat_counter(settings.model) if settings.tokens_per_minute else None
        self._schemas_supported = True

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]:
        messages = extraction_messages(snapshot, memory_type)
        answer = self._complete(messages, output_model(memory_type))
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
        answer = self._complete(messages, model)
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

    def answer_content(self, body: object) -> str:
        """The text of a chat completion's body (a batch line's), validated as a live answer is;
        a refusal is the content's failure."""
        try:
            completion = ChatCompletion.model_validate(body)
        except ValidationError as exc:
            raise invalid_response(
                f"{self.name} chat completion: the answer is not of the API's shape: "
                f"{describe(exc)}"
            ) from exc
        return _content(completion)

    def summarize(self, snapshot: SnapshotContent) -> str:
        summary = self._complete(summary_messages(snapshot), None).strip()
        if not summary:
            raise ContentError(FailureKind.INVALID_OUTPUT, "the model returned an empty summary")
        return summary

    def judge(self, text: str, existing: Candidate) -> Verdict:
        """The model's verdict; anything but one of the three words is taken as ADD, so that
        nothing is overwritten on an unclear answer."""
        prompt = JUDGE.format(existing=existing.text, new=text)
        answer = self._complete([{"role": "user", "content": prompt}], None).strip().upper()
        return Verdict(answer) if answer in set(Verdict) else Verdict.ADD

    def _complete(self, messages: list[dict[str, str]], model: type[BaseModel] | None) -> str:
        if self._limiter is not None:
            tokens = (
                chat_tokens(self._counter, [ChatMessage(**m) for m in messages])
                if self._counter is not None
                else 0
            )
            self._limiter.acquire(tokens)
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                **self.request_body(messages, model)
            )
        except openai.BadRequestError as exc:
            if model is not None and self._schemas_supported and "response_format" in str(exc):
                self._schemas_supported = False
                return self._complete(messages, model)
            raise translate(exc) from exc
        except openai.APIError as exc:
            raise translate(exc) from exc
        return _content(validated(raw, ChatCompletion, f"{self.name} chat completion"))

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


def translate(exc: openai.APIError) -> MempipeError:
    """An ``openai`` error as a mempipe failure of the right kind, naming its root cause (the
    client says only "Connection error."; the cause says "Connection refused")."""
    message = f"{type(exc).__name__}: {exc}"
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    if root is not exc and str(root) and str(root) not in message:
        message = f"{message} ({root})"
    if isinstance(exc, openai.APITimeoutError):
        return failure_error(FailureKind.TIMEOUT, message)
    if isinstance(exc, openai.APIConnectionError):
        return failure_error(FailureKind.NETWORK, message)
    if isinstance(exc, openai.RateLimitError):
        return failure_error(FailureKind.RATE_LIMIT, message, retry_after(exc.response))
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return failure_error(FailureKind.CREDENTIALS, message)
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500 or exc.status_code == 408:
            return failure_error(FailureKind.SERVER, message)
        text = f"{exc} {getattr(exc, 'code', '')}".lower()
        if any(marker in text for marker in CONTEXT_MARKERS):
            return failure_error(FailureKind.CONTEXT_TOO_LONG, message)
        return failure_error(FailureKind.BAD_REQUEST, message)
    return failure_error(FailureKind.NETWORK, message)


def retry_after(response: Any) -> float | None:
    """Seconds from a Retry-After header (a number, or an HTTP date); None when it says
    neither. The retry policy caps what it is given (``retry_after_cap``)."""
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
