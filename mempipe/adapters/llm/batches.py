"""A provider's Batch API (OpenAI's, and compatible ones), through the ``openai`` client:
upload a JSONL file of requests, create a batch of it, follow it, read its output and error
files line by line, cancel it, delete its files. Errors become mempipe's failure kinds like the
live calls' (:func:`~mempipe.adapters.llm.openai_compat.translate`); every answer is validated
where it enters."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from pydantic import ValidationError

from mempipe.adapters.llm.answers import invalid_response
from mempipe.adapters.llm.guard import ProviderGuard, translate
from mempipe.adapters.llm.openai_compat import openai_client
from mempipe.schemas.errors import describe
from mempipe.schemas.provider import BatchInfo, BatchOutputLine
from mempipe.schemas.replay import LLMSettings

if TYPE_CHECKING:
    import openai

COMPLETION_WINDOW = "24h"
DOWNLOAD_CHUNK = 1 << 20


class OpenAIBatches:
    def __init__(self, settings: LLMSettings, client: openai.OpenAI | None = None) -> None:
        self._client = client or openai_client(settings, "the Batch API")
        self._guard = ProviderGuard(str(self._client.base_url), "the Batch API")

    def upload(self, file: IO[bytes], name: str) -> str:
        """The uploaded file's id."""
        return self._call(lambda: self._client.files.create(file=(name, file), purpose="batch")).id

    def create(self, input_file_id: str, endpoint: str, metadata: dict[str, str]) -> BatchInfo:
        return self._info(
            lambda: self._client.batches.create(
                input_file_id=input_file_id,
                endpoint=endpoint,  # type: ignore[arg-type]
                completion_window=COMPLETION_WINDOW,
                metadata=metadata,
            )
        )

    def find(self, input_file_id: str) -> BatchInfo | None:
        """The batch created from this file, if one was (a run killed between creating it and
        recording its id left only the file's id)."""
        for batch in self._call(lambda: self._client.batches.list(limit=100)):
            if batch.input_file_id == input_file_id:
                return _described(batch)
        return None

    def retrieve(self, batch_id: str) -> BatchInfo:
        return self._info(lambda: self._client.batches.retrieve(batch_id))

    def cancel(self, batch_id: str) -> BatchInfo:
        return self._info(lambda: self._client.batches.cancel(batch_id))

    def lines(self, file_id: str) -> Iterator[BatchOutputLine]:
        """The file's lines, downloaded to an unnamed temporary file (gone with the process,
        whatever ends it) and read one at a time: a file of any size in bounded memory."""
        with tempfile.TemporaryFile() as spool:
            with self._call(
                lambda: self._client.files.with_streaming_response.content(file_id)
            ) as response:
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                    spool.write(chunk)
            spool.seek(0)
            for number, line in enumerate(spool, start=1):
                if not line.strip():
                    continue
                try:
                    yield BatchOutputLine.model_validate_json(line)
                except ValidationError as exc:
                    raise invalid_response(
                        f"batch file {file_id} line {number}: not a batch result: {describe(exc)}"
                    ) from exc

    def delete_file(self, file_id: str) -> None:
        """Gone already counts as deleted."""
        import openai

        try:
            self._client.files.delete(file_id)
        except openai.NotFoundError:
            return
        except openai.APIError as exc:
            raise translate(exc) from exc

    def _info(self, call: Any) -> BatchInfo:
        return _described(self._call(call))

    def _call(self, call: Any) -> Any:
        return self._guard.send(call)


def _described(batch: Any) -> BatchInfo:
    """The client's batch object as mempipe reads it; one that lacks what mempipe needs is the
    provider's failure (``invalid_response``)."""
    try:
        return BatchInfo.model_validate(batch.model_dump())
    except ValidationError as exc:
        raise invalid_response(f"a batch that is not of the API's shape: {describe(exc)}") from exc
