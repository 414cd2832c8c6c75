"""Failure classes and the retry policy fitted to each.

One question sorts a failed step: can the condition change without the request changing?
Environmental failures (network, timeouts, 5xx, rate limits, rotating credentials, a provider
answer that is not what the API promises, a full disk) can: they are retried with a backoff
fitted to the kind (seconds with jitter for the network, the server's Retry-After for rate
limits up to a ceiling), bounded in attempts and in total time: no wait starts that would end
past the deadline. Rejected credentials are environmental (the key is rotated, then a rerun
succeeds) but not retried within the run: no wait heals a revoked key, and the provider's
breaker stops the run from sending at once (``CircuitBreaker``). Content-determined failures (bad
request, context too long, refusal, output that does not validate) cannot: retrying would give
the same answer, so they are not retried. Both end recorded as failures, never as an empty result.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
)

from mempipe.errors import MempipeError, TerminalError, TransientError
from mempipe.schemas.failure import FailureClass

T = TypeVar("T")


class FailureKind(StrEnum):
    NETWORK = "network"
    TIMEOUT = "timeout"
    SERVER = "server"
    RATE_LIMIT = "rate_limit"
    CREDENTIALS = "credentials"
    BAD_REQUEST = "bad_request"
    CONTEXT_TOO_LONG = "context_too_long"
    REFUSAL = "refusal"
    INVALID_OUTPUT = "invalid_output"
    INVALID_RESPONSE = "invalid_response"
    PROVIDER_DOWN = "provider_down"
    RESOURCE = "resource"


PROVIDER_KINDS = frozenset(
    {
        FailureKind.NETWORK,
        FailureKind.TIMEOUT,
        FailureKind.SERVER,
        FailureKind.RATE_LIMIT,
        FailureKind.CREDENTIALS,
        FailureKind.INVALID_RESPONSE,
        FailureKind.PROVIDER_DOWN,
    }
)
"""The provider's own failures: whatever the text, the call did not give a usable answer."""

NOT_RETRIED_IN_RUN = frozenset({FailureKind.CREDENTIALS, FailureKind.PROVIDER_DOWN})
"""Retryable by a later run, never within this one: a rejected key (401 / 403) does not heal
between two attempts, and a provider the breaker stopped is not sent to again."""
BREAKER_COUNTS = frozenset(
    {FailureKind.NETWORK, FailureKind.TIMEOUT, FailureKind.SERVER, FailureKind.INVALID_RESPONSE}
)
"""The failures that say a provider is down. A 429 says it is busy (its Retry-After is obeyed),
a bad request or a refusal says it answered: neither trips the breaker."""


ENVIRONMENTAL = PROVIDER_KINDS | {FailureKind.RESOURCE}
"""Kinds that can pass without the request changing; ``resource`` is a full disk or an I/O
error of the store's medium, retryable once space is back."""


class EnvironmentalError(TransientError):
    def __init__(self, kind: FailureKind, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


class ContentError(TerminalError):
    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def failure_error(
    kind: FailureKind, message: str, retry_after: float | None = None
) -> MempipeError:
    if kind in ENVIRONMENTAL:
        return EnvironmentalError(kind, message, retry_after)
    return ContentError(kind, message)


def status_failure(status_code: int | None, message: str) -> MempipeError:
    """The failure an HTTP status says (a batch line's, where no exception was raised): the
    provider's for 408, 429 and 5xx or no status at all (a batch that ended before the line
    ran), the request's otherwise."""
    if status_code is None or status_code >= 500 or status_code == 408:
        return failure_error(FailureKind.SERVER, message)
    if status_code == 429:
        return failure_error(FailureKind.RATE_LIMIT, message)
    if status_code in (401, 403):
        return failure_error(FailureKind.CREDENTIALS, message)
    return failure_error(FailureKind.BAD_REQUEST, message)


def failure_class(error: BaseException) -> FailureClass:
    """Environmental when retrying could help, content-determined otherwise."""
    return (
        FailureClass.ENVIRONMENTAL if getattr(error, "retryable", False) else FailureClass.CONTENT
    )


class RetryPolicy(BaseModel):
    """Bounds and backoff bases, in seconds. Every attempt counts against both bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(default=5, ge=1, description="attempts per provider request")
    max_seconds: float = Field(
        default=120.0, gt=0, description="seconds per item, retries included; no wait passes it"
    )
    network_base: float = Field(
        default=1.0,
        ge=0,
        description="the first wait after a network failure, doubling per attempt",
    )
    network_cap: float = Field(default=20.0, ge=0, description="the longest such wait")
    rate_limit_default: float = Field(
        default=5.0, ge=0, description="wait for a 429 that gives no Retry-After"
    )
    retry_after_cap: float = Field(
        default=60.0, ge=0, description="the longest a server's Retry-After is obeyed"
    )
    breaker_failures: int = Field(
        default=5,
        ge=1,
        description="consecutive provider failures (any task of a run) that stop sending to it",
    )

    def wait_for(self, error: BaseException | None, attempt: int) -> float:
        kind = getattr(error, "kind", FailureKind.NETWORK)
        if kind is FailureKind.RATE_LIMIT:
            retry_after = getattr(error, "retry_after", None)
            wait = retry_after if retry_after is not None else self.rate_limit_default
            return min(wait, self.retry_after_cap)
        ceiling = min(self.network_cap, self.network_base * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)

    def run(self, call: Callable[[], T], sleep: Callable[[float], Any] = time.sleep) -> T:
        """Call, retrying retryable mempipe errors under this policy; the last error is raised
        with ``attempts`` set on it."""
        attempts = 0

        def counted() -> T:
            nonlocal attempts
            attempts += 1
            return call()

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            return self.wait_for(error, state.attempt_number)

        retrying = Retrying(
            retry=retry_if_exception(retried_in_run),
            stop=stop_after_attempt(self.max_attempts) | stop_before_delay(self.max_seconds),
            wait=wait,
            sleep=sleep,
            reraise=True,
        )
        try:
            return retrying(counted)
        except MempipeError as exc:
            exc.attempts = attempts  # type: ignore[attr-defined]
            raise


def retried_in_run(error: BaseException) -> bool:
    return getattr(error, "retryable", False) and getattr(error, "kind", None) not in (
        NOT_RETRIED_IN_RUN
    )


class CircuitBreaker:
    """One provider (endpoint and model) as a run sees it: after ``threshold`` consecutive
    failures that say it is down, or at once when it rejects the credentials, it is *open* and
    every later call fails at once with the cause, so the run records the rest of its work as
    retryable and ends within seconds instead of paying every timeout again. A success closes
    the count; an open breaker stays open for the rest of the run (the next run tries again)."""

    def __init__(self, name: str, threshold: int) -> None:
        self.name, self.threshold = name, threshold
        self._failures = 0
        self._cause: str | None = None
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        return self._cause is not None

    @property
    def cause(self) -> str | None:
        return self._cause

    def trip(self, cause: str) -> None:
        """Open it for a cause met elsewhere (another process of the run)."""
        with self._lock:
            self._cause = self._cause or cause

    def check(self) -> None:
        """Raise the breaker's error when it is open: nothing is sent."""
        if self._cause is not None:
            raise EnvironmentalError(
                FailureKind.PROVIDER_DOWN,
                f"nothing more is sent to {self.name} in this run: {self._cause}",
            )

    def succeeded(self) -> None:
        with self._lock:
            self._failures = 0

    @staticmethod
    def counts(error: BaseException) -> bool:
        """Whether ``error`` says the provider is down (it counts towards opening)."""
        return getattr(error, "kind", None) in BREAKER_COUNTS

    def failed(self, error: BaseException) -> None:
        kind = getattr(error, "kind", None)
        with self._lock:
            if self._cause is not None:
                return
            if kind is FailureKind.CREDENTIALS:
                self._cause = f"it rejected the credentials ({error})"
            elif kind in BREAKER_COUNTS:
                self._failures += 1
                if self._failures >= self.threshold:
                    self._cause = f"{self._failures} failures in a row, the last: {error}"
            else:
                self._failures = 0
