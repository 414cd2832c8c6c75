"""The one door every request to a provider goes through (live extraction, summaries, judge
calls, embeddings, the Batch API's uploads and batches): its budget is drawn, its breaker
checked, the ``openai`` error translated into mempipe's failure kinds, and the outcome counted,
and what the answer says it used (``usage``) recorded for the run (:mod:`mempipe.spend`).

A breaker (``domain.failures.CircuitBreaker``) is one per endpoint and model within a run, so
every task of the run, in every thread, sees the same one: the first task to meet a dead
provider or a revoked key stops the others from sending. Where a Prefect API is present, the
run's processes (Dask workers) share it: each failure that counts is also counted in a Prefect
concurrency limit of the run, endpoint and model (an atomic count, so that the run's processes
together open it after the same number of failures as one process's threads would), and an
open breaker is a Prefect variable of that name, which the run's other processes read every
few seconds: they stop sending too. Outside a flow run (a search, a command's plan) the process
is the run, and nothing is shared.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from mempipe import spend
from mempipe.adapters.llm.ratelimit import Limiter, prefect_server_present
from mempipe.domain.failures import CircuitBreaker, FailureKind, failure_error
from mempipe.errors import MempipeError
from mempipe.schemas.costs import RequestKind, Via
from mempipe.schemas.provider import Usage
from mempipe.settings import load_retry_policy
from mempipe.spend import PROCESS, current_run

if TYPE_CHECKING:
    import openai

T = TypeVar("T")
CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window")

SHARED_EVERY_S = 2.0
"""How often a process asks whether another process of its run opened a breaker."""

_breakers: dict[tuple[str, str, str], SharedBreaker] = {}
_lock = threading.Lock()


class SharedBreaker:
    """A run's breaker in this process, and its Prefect variable where a server is present."""

    def __init__(self, run: str, endpoint: str, model: str) -> None:
        self.local = CircuitBreaker(f"{model} at {endpoint}", load_retry_policy().breaker_failures)
        digest = hashlib.sha256(f"{run}|{endpoint}|{model}".encode()).hexdigest()[:24]
        self._variable = f"mempipe-breaker-{digest}" if run != PROCESS else None
        self._asked = 0.0
        self._counted = 0.0  # when this process last added to the run's count or looked at it

    def check(self) -> None:
        if not self.local.open and self._variable is not None:
            now = time.monotonic()
            if now - self._asked >= SHARED_EVERY_S and prefect_server_present():
                self._asked = now
                cause = _read_variable(self._variable)
                if cause:
                    self.local.trip(f"another process of this run stopped: {cause}")
        self.local.check()

    def failed(self, error: BaseException) -> None:
        was_open = self.local.open
        self.local.failed(error)
        shared = self._variable is not None and prefect_server_present()
        if shared and not self.local.open and self.local.counts(error):
            together = _count_failure(f"{self._variable}-count", self.local.threshold)
            self._counted = time.monotonic()
            if together >= self.local.threshold:
                self.local.trip(
                    f"{together} failures in a row across the run's processes, the last: {error}"
                )
        if shared and self.local.open and not was_open:
            _write_variable(self._variable or "", self.local.cause or "")

    def succeeded(self) -> None:
        """A success starts the run's count again: this process's, and, looked at every few
        seconds, the count the run's other processes added to."""
        now = time.monotonic()
        if self._variable and now - self._counted >= SHARED_EVERY_S and prefect_server_present():
            self._counted = now
            _reset_count(f"{self._variable}-count")
        self.local.succeeded()


def breaker(endpoint: str, model: str) -> SharedBreaker:
    """The breaker of this run (or process) for ``model`` at ``endpoint``."""
    key = (current_run(), endpoint.rstrip("/"), model)
    with _lock:
        found = _breakers.get(key)
        if found is None:
            found = _breakers[key] = SharedBreaker(*key)
        return found


class ProviderGuard:
    """A provider's budget and breaker, for one adapter."""

    def __init__(self, endpoint: str, model: str, limiter: Limiter | None = None) -> None:
        self.model = model
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
        except MempipeError as exc:
            self.breaker.failed(exc)
            raise
        except Exception as exc:
            if not _from_openai(exc):
                raise
            error = translate(exc)  # type: ignore[arg-type]
            self.breaker.failed(error)
            raise error from exc
        self.breaker.succeeded()
        return result

    def spent(
        self,
        kind: RequestKind,
        usage: Usage | None,
        memory_type: str | None = None,
        *,
        via: Via = "live",
        requests: int = 1,
    ) -> None:
        """An answer's usage, counted for the run (:mod:`mempipe.spend`)."""
        spend.record(kind, self.model, usage, memory_type, via=via, requests=requests)


def _from_openai(exc: Exception) -> bool:
    """Whether ``exc`` is the ``openai`` client's: that client, once it exists, has imported
    the package, so a process whose providers are all local never loads it."""
    client = sys.modules.get("openai")
    return client is not None and isinstance(exc, client.APIError)


def _read_variable(name: str) -> str | None:
    from prefect.variables import Variable

    try:
        value = Variable.get(name, default=None, _sync=True)  # type: ignore[call-arg]
    except Exception:
        return None
    return str(value) if value else None


def _count_failure(name: str, threshold: int) -> int:
    """One more failure in the run's count (a Prefect concurrency limit of ``threshold`` slots,
    made at the first): the count after it; the threshold where the limit is full."""
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound, PrefectHTTPStatusError

    try:
        with get_client(sync_client=True) as client:
            try:
                client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                made = GlobalConcurrencyLimitCreate(
                    name=name, limit=threshold, slot_decay_per_second=0
                )
                with contextlib.suppress(ObjectAlreadyExists):
                    client.create_global_concurrency_limit(made)
            try:
                client.increment_concurrency_slots(names=[name], slots=1, mode="concurrency")
            except PrefectHTTPStatusError as exc:
                if exc.response.status_code == 423:  # no slot left: the count is full
                    return threshold
                raise
            return client.read_global_concurrency_limit_by_name(name).active_slots
    except Exception:
        return 0  # the server did not answer: this process's own count still holds


def _reset_count(name: str) -> None:
    """The run's count back to none, where it has one and holds any."""
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate

    with contextlib.suppress(Exception), get_client(sync_client=True) as client:
        if client.read_global_concurrency_limit_by_name(name).active_slots:
            cleared = GlobalConcurrencyLimitUpdate(active_slots=0)
            client.update_global_concurrency_limit(name, cleared)


def _write_variable(name: str, cause: str) -> None:
    from prefect.variables import Variable

    with contextlib.suppress(Exception):  # the run's own breaker is open all the same
        Variable.set(name, cause[:4000], overwrite=True, _sync=True)  # type: ignore[call-arg]


def translate(exc: openai.APIError) -> MempipeError:
    """An ``openai`` error as a mempipe failure of the right kind, naming its root cause (the
    client says only "Connection error."; the cause says "Connection refused")."""
    message = f"{type(exc).__name__}: {exc}"
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    if root is not exc and str(root) and str(root) not in message:
        message = f"{message} ({root})"
    import openai

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
