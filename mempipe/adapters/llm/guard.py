"""The one door every request to a provider goes through (live extraction, summaries, judge
calls, embeddings, the Batch API's uploads and batches): its budget is drawn, its breaker
checked, the ``openai`` error translated into mempipe's failure kinds, and the outcome counted.

A breaker (``domain.failures.CircuitBreaker``) is one per endpoint and model within a run, so
every task of the run, in every thread, sees the same one: the first task to meet a dead
provider or a revoked key stops the others from sending. Outside a flow run (a search, a
command's plan) the process is the run.
"""

from __future__ import annotations

import email.utils
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import openai

from mempipe.adapters.llm.ratelimit import Limiter
from mempipe.domain.failures import CircuitBreaker, FailureKind, failure_error
from mempipe.errors import MempipeError
from mempipe.settings import load_retry_policy

T = TypeVar("T")
CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window")

_breakers: dict[tuple[str, str, str], CircuitBreaker] = {}
_lock = threading.Lock()


def breaker(endpoint: str, model: str) -> CircuitBreaker:
    """The breaker of this run (or process) for ``model`` at ``endpoint``."""
    key = (_run_scope(), endpoint.rstrip("/"), model)
    with _lock:
        found = _breakers.get(key)
        if found is None:
            name = f"{model} at {key[1]}"
            found = _breakers[key] = CircuitBreaker(name, load_retry_policy().breaker_failures)
        return found


class ProviderGuard:
    """A provider's budget and breaker, for one adapter."""

    def __init__(self, endpoint: str, model: str, limiter: Limiter | None = None) -> None:
        self.breaker = breaker(endpoint, model)
        self._limiter = limiter

    def send(self, call: Callable[[], T], tokens: int = 0) -> T:
        """``call`` (the request and the validation of its answer) unless the breaker is open;
        a failure, translated, counts towards it."""
        self.breaker.check()
        if self._limiter is not None:
            self._limiter.acquire(tokens)
        try:
            result = call()
        except openai.APIError as exc:
            error = translate(exc)
            self.breaker.failed(error)
            raise error from exc
        except MempipeError as exc:
            self.breaker.failed(exc)
            raise
        self.breaker.succeeded()
        return result


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


def _run_scope() -> str:
    from prefect.runtime import flow_run

    run_id = flow_run.id
    return str(run_id) if run_id else "process"
