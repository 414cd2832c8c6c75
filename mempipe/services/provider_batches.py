"""Work sent through a provider's Batch API: requests cut into files within the provider's
limits, each file uploaded and recorded before its batch is created, its batch id recorded the
moment it exists; batches followed until they end; their lines handed back for the job to apply.

A run that follows a killed one adopts the batches it left open (:func:`adopt`) before it
submits anything, so no request is submitted twice: a file recorded without a batch id is
looked up at the provider by its file id, and created only if no batch was made of it.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import IO, Any, Protocol

import orjson
from pydantic import BaseModel, ConfigDict, Field

from mempipe.adapters.llm.batches import OpenAIBatches
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.costs import FileFill
from mempipe.domain.failures import RetryPolicy, status_failure
from mempipe.errors import MempipeError
from mempipe.interrupts import stop_requested
from mempipe.progress import track
from mempipe.schemas.batch import OPEN, BatchLimits, BatchRequest, BatchStatus, ProviderBatch
from mempipe.schemas.provider import BATCH_RUNNING, BatchInfo, BatchOutputLine
from mempipe.services.runs import recorded
from mempipe.settings import load_llm_settings

ENDED = {
    "completed": BatchStatus.APPLIED,
    "expired": BatchStatus.EXPIRED,
    "cancelled": BatchStatus.CANCELLED,
    "failed": BatchStatus.FAILED,
}
"""The Batch API's final states, and what a batch is recorded as once its lines are applied."""

CANCEL_ASKED = "batches cancelled"
"""The checkpoint ``runs cancel`` sets on the run it cancels: the run submits nothing after it,
whichever process it runs in, and cancels a batch it created while the cancel was listing."""


class BatchClient(Protocol):
    """What :class:`~mempipe.adapters.llm.batches.OpenAIBatches` offers."""

    def upload(self, file: IO[bytes], name: str) -> str: ...

    def create(self, input_file_id: str, endpoint: str, metadata: dict[str, str]) -> BatchInfo: ...

    def find(self, input_file_id: str) -> BatchInfo | None: ...

    def retrieve(self, batch_id: str) -> BatchInfo: ...

    def cancel(self, batch_id: str) -> BatchInfo: ...

    def lines(self, file_id: str) -> Iterator[BatchOutputLine]: ...

    def delete_file(self, file_id: str) -> None: ...


class BatchWork:
    """One job's batches against one provider: submit, follow, read, close."""

    def __init__(
        self,
        uow: UnitOfWork,
        client: BatchClient,
        *,
        run_id: str,
        job: str,
        scope: str,
        endpoint: str,
        limits: BatchLimits,
        retry: RetryPolicy,
        sleep: Callable[[float], Any],
    ) -> None:
        self.uow, self.client = uow, client
        self.run_id, self.job, self.scope, self.endpoint = run_id, job, scope, endpoint
        self.limits, self.retry, self.sleep = limits, retry, sleep

    def adopt(self) -> list[ProviderBatch]:
        """The open batches of this job and scope, any run's, each with its batch id."""
        return [
            self._created(batch) for batch in self.uow.batches.open_batches(self.job, self.scope)
        ]

    def submit(self, requests: Iterable[BatchRequest]) -> list[ProviderBatch]:
        """Cut ``requests`` into files and submit each; stops between files when asked to
        (what was submitted is recorded, and adopted by the next run)."""
        submitted: list[ProviderBatch] = []
        for lines, items in self._files(requests):
            key = f"{self.run_id}:{uuid.uuid4().hex[:12]}"  # a run's tasks submit at once
            lines.seek(0)
            file_id = self._call(lambda f=lines, k=key: self.client.upload(f, f"{k}.jsonl"))
            lines.close()
            batch = ProviderBatch(
                key=key,
                run_id=self.run_id,
                job=self.job,
                scope=self.scope,
                endpoint=self.endpoint,
                input_file_id=file_id,
                requests=len(items),
                items=items,
                created_at=datetime.now(UTC),
            )
            self.uow.batches.record_batch(batch)
            submitted.append(self._created(batch))
            if self._cancel_asked(submitted[-1]) or stop_requested():
                break
        return submitted

    def follow(self, batches: list[ProviderBatch]) -> Iterator[tuple[ProviderBatch, BatchInfo]]:
        """Each batch with its final state, in the order given, each as soon as it and those
        before it have ended (a replay applies an owner's history in time order). Polled, the
        wait doubling from ``poll_first_seconds`` to ``poll_max_seconds``; a stop request ends
        the wait (:class:`~mempipe.interrupts.StopRequested`), the batches staying open for the
        next run."""
        if not batches:
            return
        ended: dict[str, BatchInfo] = {}
        done = 0
        wait = self.limits.poll_first_seconds
        with track("provider batches", len(batches), "batches") as progress:
            while done < len(batches):
                for batch in batches[done:]:
                    if batch.key not in ended:
                        assert batch.batch_id is not None
                        info = self._call(lambda b=batch.batch_id: self.client.retrieve(b))
                        if info.status not in BATCH_RUNNING:
                            ended[batch.key] = info
                while done < len(batches) and batches[done].key in ended:
                    yield batches[done], ended[batches[done].key]
                    done += 1
                progress.update(done)
                if done < len(batches):
                    self.sleep(wait)
                    wait = min(wait * 2, self.limits.poll_max_seconds)

    def lines(self, info: BatchInfo) -> Iterator[BatchOutputLine]:
        """The batch's answered lines: its output file's, then its error file's."""
        for file_id in (info.output_file_id, info.error_file_id):
            if file_id:
                yield from self.client.lines(file_id)

    @staticmethod
    def line_failure(line: BatchOutputLine) -> MempipeError | None:
        """A line's failure, None for an answered one."""
        response = line.response
        if response is not None and response.status_code == 200 and line.error is None:
            return None
        error = line.error
        detail = (error.code or error.message) if error is not None else None
        if detail is None and response is not None:
            detail = str(response.body.get("error", ""))[:200] or None
        status = response.status_code if response is not None else None
        return status_failure(
            status, f"batch line {line.custom_id}: {status or 'no answer'} {detail or ''}".strip()
        )

    def close(self, batch: ProviderBatch, info: BatchInfo, error: str | None = None) -> None:
        """Recorded as ended, then its files deleted at the provider: they hold users' text,
        which an erase could not reach there."""
        batch.status = ENDED.get(info.status, BatchStatus.FAILED)
        batch.finished_at = datetime.now(UTC)
        batch.error = error
        self.uow.batches.record_batch(batch)
        for file_id in (batch.input_file_id, info.output_file_id, info.error_file_id):
            if file_id:
                self._call(lambda f=file_id: self.client.delete_file(f))

    def _cancel_asked(self, batch: ProviderBatch) -> bool:
        """Whether ``runs cancel`` was asked for this run; if so, the batch just created is
        cancelled too (a cancel lists only the batches created before it)."""
        run = self.uow.runs.get_run(self.run_id)
        if run is None or not run.checkpoints.get(CANCEL_ASKED):
            return False
        assert batch.batch_id is not None
        info = self._call(lambda: self.client.retrieve(batch.batch_id))
        if info.status in BATCH_RUNNING and info.status != "cancelling":
            self._call(lambda: self.client.cancel(batch.batch_id))
        return True

    def _created(self, batch: ProviderBatch) -> ProviderBatch:
        """The batch with its provider id: found by its file where a killed run created it
        without recording the id, else created now."""
        if batch.batch_id is not None:
            return batch
        info = self._call(lambda: self.client.find(batch.input_file_id))
        if info is None:
            metadata = {"mempipe_run": self.run_id, "mempipe_batch": batch.key}
            info = self._call(
                lambda: self.client.create(batch.input_file_id, self.endpoint, metadata)
            )
        batch.batch_id, batch.status = info.id, BatchStatus.SUBMITTED
        self.uow.batches.record_batch(batch)
        return batch

    def _files(
        self, requests: Iterable[BatchRequest]
    ) -> Iterator[tuple[IO[bytes], dict[str, list[int | str]]]]:
        """JSONL files within the limits, each in an unnamed temporary file (gone with the
        process, whatever ends it), with the items of each of its requests."""
        embeddings = self.endpoint.endswith("/embeddings")
        fill = FileFill(self.limits, embeddings)
        spool: IO[bytes] | None = None
        items: dict[str, list[int | str]] = {}
        for request in requests:
            line = orjson.dumps(
                {
                    "custom_id": request.custom_id,
                    "method": "POST",
                    "url": self.endpoint,
                    "body": request.body,
                }
            )
            if spool is not None and fill.closes_before(len(line) + 1, request.inputs):
                yield spool, items
                spool, items, fill = None, {}, FileFill(self.limits, embeddings)
            if spool is None:
                spool = tempfile.TemporaryFile()  # noqa: SIM115 - submit closes it once uploaded
            spool.write(line + b"\n")
            items[request.custom_id] = request.items
            fill.add(len(line) + 1, request.inputs)
        if spool is not None:
            yield spool, items

    def _call(self, call: Callable[[], Any]) -> Any:
        return self.retry.run(call, sleep=self.sleep)


def cancel_batches(batches: list[ProviderBatch], client: BatchClient) -> list[str]:
    """Cancel the open ones at the provider; the provider's ids of those cancelled. Their
    records change when a run follows them to their end (it applies what they finished)."""
    cancelled: list[str] = []
    for batch in batches:
        if batch.status in OPEN and batch.batch_id is not None:
            client.cancel(batch.batch_id)
            cancelled.append(batch.batch_id)
    return cancelled


class Cancelled(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    run_id: str
    cancelled: list[str] = Field(description="the provider's ids of the batches cancelled")


def cancel_run(uow: UnitOfWork, run_id: str) -> Cancelled:
    recorded(uow, run_id)
    uow.runs.set_checkpoint(run_id, CANCEL_ASKED, True)
    done = cancel_batches(uow.batches.run_batches(run_id), OpenAIBatches(load_llm_settings()))
    return Cancelled(store=uow.url, run_id=run_id, cancelled=done)
