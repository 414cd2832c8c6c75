"""Budgets towards a provider: requests and tokens per minute, shared by every worker.

With a Prefect server (every run mempipe starts has one), a budget is a pair of Prefect global
concurrency limits with slot decay (``mempipe-<endpoint>-<model>-requests`` / ``-tokens``),
created or updated to the configured figures, shared by every process and machine using that
server. Without one, a process-wide token bucket. Either way a budget never lets more than its
figure through in any 60 seconds: its burst is a tenth of the minute's figure and it refills at
the other nine tenths. Every attempt draws on it before it is sent, retries included, so a 429
costs budget like any request rather than racing it. ``rate_limit`` names a request limit the
user made instead (``prefect gcl create``)."""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from mempipe.domain.failures import EnvironmentalError, FailureKind
from mempipe.errors import ConfigError
from mempipe.schemas.replay import LLMSettings

BURST = 0.1
"""A budget's burst, as a share of its minute's figure; it refills at the rest."""
TOKEN_WAIT_S = 180.0
"""The longest a request waits for its tokens before that counts as a rate-limit failure."""


class Limiter(Protocol):
    def acquire(self, tokens: int = 0) -> None:
        """Wait until a request of ``tokens`` tokens may go."""
        ...


class TokenBucket:
    """``capacity`` at most, refilled at ``per_second``; a taker waits for its share (one
    larger than the capacity takes it in turns)."""

    def __init__(
        self,
        capacity: float,
        per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self.capacity, self.per_second = capacity, per_second
        self._clock, self._sleep = clock, sleep
        self._level, self._at = capacity, clock()
        self._lock = threading.Lock()

    def take(self, amount: float) -> None:
        while amount > 0:
            part = min(amount, self.capacity)
            with self._lock:
                now = self._clock()
                self._level = min(self.capacity, self._level + (now - self._at) * self.per_second)
                self._at = now
                self._level -= part  # may go below zero: the wait pays the debt, in order
                wait = -self._level / self.per_second if self._level < 0 else 0.0
            if wait:
                self._sleep(wait)
            amount -= part


def per_minute_bucket(per_minute: float, **kwargs: Any) -> TokenBucket:
    """A bucket that lets at most ``per_minute`` through in any 60 seconds."""
    capacity = max(1.0, per_minute * BURST)
    return TokenBucket(capacity, (per_minute - capacity) / 60, **kwargs)


class InProcessBudget:
    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None):
        self._requests = per_minute_bucket(requests_per_minute) if requests_per_minute else None
        self._tokens = per_minute_bucket(tokens_per_minute) if tokens_per_minute else None

    def acquire(self, tokens: int = 0) -> None:
        if self._requests is not None:
            self._requests.take(1)
        if self._tokens is not None and tokens:
            self._tokens.take(tokens)


class PrefectBudget:
    """Slots of Prefect global concurrency limits with slot decay: one per request from the
    request limit, one per token from the token limit (in turns of at most its size)."""

    def __init__(
        self,
        requests: tuple[str, int] | None,
        tokens: tuple[str, int] | None,
        timeout_s: float,
        per_minute: float = 60,
    ) -> None:
        """``per_minute``: the request budget a limit that is not there would be made with."""
        self.requests, self.tokens, self.timeout_s = requests, tokens, timeout_s
        self.per_minute = per_minute

    def acquire(self, tokens: int = 0) -> None:
        if self.requests is not None:
            self._occupy(self.requests[0], 1, self.timeout_s, self.per_minute)
        if self.tokens is not None and tokens:
            name, size = self.tokens
            left = tokens
            while left > 0:
                self._occupy(name, min(left, size), max(self.timeout_s, TOKEN_WAIT_S), size / BURST)
                left -= size

    @staticmethod
    def _occupy(name: str, slots: int, timeout_s: float, per_minute: float) -> None:
        from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError
        from prefect.concurrency.sync import rate_limit

        try:
            rate_limit(name, occupy=slots, timeout_seconds=timeout_s, strict=True)
        except TimeoutError as exc:
            raise EnvironmentalError(
                FailureKind.RATE_LIMIT,
                f"no slot of Prefect rate limit {name!r} within {timeout_s:g} s",
            ) from exc
        except ConcurrencySlotAcquisitionError as exc:
            raise missing_limit(name, per_minute) from exc


def budget_names(endpoint: str, model: str) -> tuple[str, str]:
    """The Prefect limits of an endpoint and model's budget (a provider's limits are per
    model): readable, and unique by a hash of both."""
    digest = hashlib.sha256(f"{endpoint}|{model}".encode()).hexdigest()[:8]
    stem = f"mempipe-{model.replace(':', '-')[:40]}-{digest}"
    return f"{stem}-requests", f"{stem}-tokens"


def ensure_budget_limit(name: str, per_minute: float) -> int:
    """The Prefect limit ``name`` holding ``per_minute`` as :func:`per_minute_bucket` does,
    created or updated; returns its size (the most one acquisition may take)."""
    from prefect import get_client
    from prefect.exceptions import ObjectAlreadyExists

    size, decay = budget_figures(per_minute)
    with get_client(sync_client=True) as client:
        try:
            client.upsert_global_concurrency_limit_by_name(name, size, decay)
        except ObjectAlreadyExists:  # another process made it between the read and the create
            client.upsert_global_concurrency_limit_by_name(name, size, decay)
    return size


def missing_limit(name: str, per_minute: float) -> ConfigError:
    size, decay = budget_figures(per_minute)
    return ConfigError(
        f"Prefect rate limit {name!r} is not on the server: create it with "
        f"`prefect gcl create {name} --limit {size} --slot-decay-per-second {decay:g}` "
        f"({per_minute:g} a minute; scale both to your budget)"
    )


def require_limit(name: str, per_minute: float) -> None:
    """The rate limit the user named is on the server: a run that names one that is not is
    refused when its provider is built, before any request."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound as exc:
            raise missing_limit(name, per_minute) from exc


def budget_figures(per_minute: float) -> tuple[int, float]:
    """A Prefect limit's size and slot decay per second that let at most ``per_minute``
    through in any 60 seconds (a tenth as a burst, the rest as its refill)."""
    size = max(1, math.floor(per_minute * BURST))
    return size, round((per_minute - size) / 60, 6)


def prefect_server_present() -> bool:
    from prefect.settings import get_current_settings

    return bool(get_current_settings().api.url)


_budgets: dict[str, Limiter] = {}
_lock = threading.Lock()


def limiter(settings: LLMSettings, endpoint: str) -> Limiter | None:
    """The budget requests to ``endpoint`` for ``settings.model`` draw on (one per process for
    each endpoint, model and figures); None without any."""
    rpm, tpm = settings.requests_per_minute, settings.tokens_per_minute
    if not (settings.rate_limit or rpm or tpm):
        return None
    key = f"{endpoint}|{settings.model}|{settings.rate_limit}|{rpm}|{tpm}"
    with _lock:
        if key not in _budgets:
            _budgets[key] = _budget(settings, endpoint)
        return _budgets[key]


def _budget(settings: LLMSettings, endpoint: str) -> Limiter:
    rpm, tpm = settings.requests_per_minute, settings.tokens_per_minute
    if not (settings.rate_limit or prefect_server_present()):
        return InProcessBudget(rpm, tpm)
    request_name, token_name = budget_names(endpoint, settings.model)
    requests = None
    if settings.rate_limit:
        require_limit(settings.rate_limit, rpm or 60)
        requests = (settings.rate_limit, 1)
    elif rpm:
        requests = (request_name, ensure_budget_limit(request_name, rpm))
    tokens = (token_name, ensure_budget_limit(token_name, tpm)) if tpm else None
    return PrefectBudget(requests, tokens, settings.timeout_seconds, rpm or 60)
