"""A local fake OpenAI-compatible endpoint answering from a script, for the real ``openai``
client to talk to. Each request takes the next scripted answer (the last one repeats)."""

from __future__ import annotations

import email
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None
    content_type: str = "application/json"


def completion(content: str | None, refusal: str | None = None, finish: str = "stop") -> Answer:
    return Answer(
        body={
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "finish_reason": finish,
                }
            ],
        }
    )


def memories(*items: dict[str, Any]) -> Answer:
    return completion(json.dumps({"memories": list(items)}))


def error(status: int, message: str, code: str | None = None, **headers: str) -> Answer:
    return Answer(
        status=status,
        body={"error": {"message": message, "type": "invalid_request_error", "code": code}},
        headers=headers,
    )


def embeddings(body: dict[str, Any], dimensions: int, delay: float = 0.0) -> Answer:
    """An embeddings answer for the request's inputs: the hashing model's vectors, so that the
    same text always gets the same vector."""
    from mempipe.adapters.embedding.hashing import HashingEmbedder

    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    vectors = HashingEmbedder(dimensions).embed(texts)
    return Answer(
        body={
            "object": "list",
            "model": body.get("model", "fake-embed"),
            "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ],
        },
        delay=delay,
    )


def rotated(dimensions: int, seed: int = 7) -> Callable[[dict[str, Any]], Answer]:
    """Another model: the hashing model's vectors turned by a fixed random rotation, so that
    its space differs from the hashing model's as two models' do, and a map between the two
    exists (a bridge fitted on pairs should find it)."""
    import numpy as np

    rotation, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dimensions, dimensions)))

    def answer(body: dict[str, Any]) -> Answer:
        found = embeddings(body, dimensions)
        for item in found.body["data"]:  # type: ignore[index]
            item["embedding"] = (np.asarray(item["embedding"]) @ rotation).tolist()
        return found

    return answer


def refused(model: str) -> Answer:
    """A model the endpoint no longer serves (retired, or the key no longer allowed it)."""
    return error(404, f"The model `{model}` does not exist", "model_not_found")


FAULTS = (
    "500",
    "hang",
    "429",
    "wrong-dimension",
    "nan",
    "short-list",
    "non-json",
    "text-plain",
    "empty-choices",
)
"""How the endpoint misbehaves on purpose, for embeddings and chat alike."""


def faulty(fault: str, dimensions: int, hang_s: float = 30.0) -> Callable[[dict[str, Any]], Answer]:
    """A responder that fails every request the way ``fault`` names (a well-formed answer
    where the fault does not apply to the request's kind, e.g. empty choices to embeddings)."""

    def respond(body: dict[str, Any]) -> Answer:
        is_embedding = "input" in body
        if fault == "500":
            return error(500, "internal error")
        if fault == "hang":
            return Answer(status=500, body={}, delay=hang_s)
        if fault == "429":
            return error(429, "slow down", retry_after="100000")
        if fault == "non-json":
            return Answer(raw=b'{"object": "list", "data": [', content_type="application/json")
        if fault == "text-plain":
            return Answer(raw=b"upstream connect error", content_type="text/plain")
        if not is_embedding:
            if fault == "empty-choices":
                return Answer(body={"id": "x", "object": "chat.completion", "choices": []})
            return completion(json.dumps({"memories": []}))
        answer = embeddings(body, dimensions)
        data = answer.body["data"]  # type: ignore[index]
        if fault == "wrong-dimension":
            for item in data:
                item["embedding"] = item["embedding"][: dimensions // 2]
        elif fault == "nan":
            answer = Answer(raw=_with_nan(answer.body or {}))
        elif fault == "short-list":
            del data[-1]
        return answer

    return respond


def matryoshka(full: int) -> Callable[[dict[str, Any]], Answer]:
    """A Matryoshka model, as OpenAI's text-embedding-3-* answer: the vector at ``dimensions``
    is the first values of the ``full`` one, renormalized."""

    def answer(body: dict[str, Any]) -> Answer:
        import numpy as np

        whole = embeddings(body, full)
        size = int(body.get("dimensions", full))
        for item in whole.body["data"]:
            cut = np.asarray(item["embedding"], dtype=np.float64)[:size]
            item["embedding"] = (cut / np.linalg.norm(cut)).tolist()
        return whole

    return answer


def _with_nan(body: dict[str, Any]) -> bytes:
    """The body with the first value of each vector NaN (Python's json writes it as ``NaN``)."""
    for item in body["data"]:
        item["embedding"][0] = float("nan")
    return json.dumps(body).encode()


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Answer] = []
        self.responder: Callable[[dict[str, Any]], Answer] | None = None
        self.requests: list[dict[str, Any]] = []
        self.request_times: list[float] = []
        self.authorizations: list[str] = []
        self.batches = FakeBatches(self)
        self._lock = threading.Lock()

    def next_answer(self, body: dict[str, Any]) -> Answer:
        """The responder's answer to this request where one is set, else the script's next."""
        with self._lock:
            self.requests.append(body)
            self.request_times.append(time.time())
            return self.answer(body)

    def answer(self, body: dict[str, Any]) -> Answer:
        if self.responder is not None:
            return with_usage(body, self.responder(body))
        return with_usage(body, self.script.pop(0) if len(self.script) > 1 else self.script[0])


def usage_of(body: dict[str, Any], content: str = "") -> dict[str, int] | None:
    """What OpenAI would count for a request (``content``: a chat answer's text): o200k for
    chat, 3 tokens a message and 3 for the reply; cl100k for embeddings. None for another body."""
    import bpe_openai

    if "messages" in body:
        encoding = bpe_openai.get_encoding("o200k_base")
        prompt = 3 + sum(3 + len(encoding.encode_ordinary(m["content"])) for m in body["messages"])
        completion = len(encoding.encode_ordinary(content))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    if "input" in body:
        encoding = bpe_openai.get_encoding("cl100k_base")
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        tokens = sum(len(encoding.encode_ordinary(t)) for t in texts)
        return {"prompt_tokens": tokens, "total_tokens": tokens}
    return None


def with_usage(body: dict[str, Any], answer: Answer) -> Answer:
    """The answer with the ``usage`` OpenAI reports (:func:`usage_of`), where the script gave
    none: a scripted ``"usage": None`` stays, for a provider that reports nothing."""
    if answer.status != 200 or answer.body is None or "usage" in answer.body:
        return answer
    content = answer.body.get("choices", [{}])[0].get("message", {}).get("content") or ""
    usage = usage_of(body, content)
    return answer if usage is None else replace(answer, body={**answer.body, "usage": usage})


class FakeBatches:
    """The Files and Batches endpoints: a batch runs its lines through the endpoint's responder
    once ``delay`` seconds have passed since it was created (seen at the next retrieve), its
    answers written to an output file (200s) and an error file (the rest). ``failing``: custom
    ids whose lines fail with a 500; ``expire``: batches end ``expired`` with only the first
    half of their lines run. ``lines``: every line of every batch created, to count what was
    submitted."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake
        self.delay = 0.2
        self.failing: set[str] = set()
        self.expire = False
        self.files: dict[str, bytes] = {}
        self.deleted: list[str] = []
        self.batches: dict[str, dict[str, Any]] = {}
        self.lines: list[dict[str, Any]] = []
        self._started: dict[str, float] = {}
        self._file_ids = itertools.count(1)
        self._lock = threading.RLock()

    def upload(self, content: bytes, filename: str) -> dict[str, Any]:
        with self._lock:
            file_id = f"file-{next(self._file_ids)}"
            self.files[file_id] = content
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": "batch",
            "status": "processed",
        }

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            batch_id = f"batch_{len(self.batches) + 1}"
            requests = [json.loads(line) for line in self.files[body["input_file_id"]].splitlines()]
            self.lines.extend(requests)
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "errors": None,
                "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window", "24h"),
                "status": "in_progress",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": int(time.time()),
                "request_counts": {"total": len(requests), "completed": 0, "failed": 0},
                "metadata": body.get("metadata"),
            }
            self._started[batch_id] = time.monotonic()
            return dict(self.batches[batch_id])

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            due = time.monotonic() - self._started[batch_id] >= self.delay
            if batch["status"] == "cancelling" or (batch["status"] == "in_progress" and due):
                self._run(batch)
            return dict(batch)

    def cancel(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            if batch["status"] == "in_progress":
                batch["status"] = "cancelling"
            return dict(batch)

    def _run(self, batch: dict[str, Any]) -> None:
        requests = [json.loads(line) for line in self.files[batch["input_file_id"]].splitlines()]
        ending = {"cancelling": "cancelled"}.get(batch["status"], "completed")
        if self.expire:
            ending = "expired"
        run = requests if ending == "completed" else requests[: len(requests) // 2]
        output, errors = [], []
        for request in run:
            answer = (
                error(500, "line failed on purpose")
                if request["custom_id"] in self.failing
                else self.fake.answer(request["body"])
            )
            line = {
                "id": f"batch_req_{len(output) + len(errors)}",
                "custom_id": request["custom_id"],
                "response": {"status_code": answer.status, "body": answer.body},
                "error": None,
            }
            (output if answer.status == 200 else errors).append(line)
        for name, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
                batch[name] = self.upload(content, f"{batch['id']}-{name}.jsonl")["id"]
        batch["status"] = ending
        batch["request_counts"] = {
            "total": len(requests),
            "completed": len(output),
            "failed": len(errors),
        }

    def listing(self) -> dict[str, Any]:
        with self._lock:
            data = [dict(b) for b in reversed(list(self.batches.values()))]
        return {"object": "list", "data": data, "has_more": False}

    def delete(self, file_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.files.pop(file_id, None) is None:
                return 404, {"error": {"message": "no such file", "type": "invalid_request_error"}}
            self.deleted.append(file_id)
        return 200, {"id": file_id, "object": "file", "deleted": True}


def _multipart(content_type: str, payload: bytes) -> tuple[bytes, str]:
    """The ``file`` part of a multipart upload: its bytes and file name."""
    message = email.message_from_bytes(f"content-type: {content_type}\r\n\r\n".encode() + payload)
    for part in message.get_payload():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_payload(decode=True), part.get_filename() or "upload.jsonl"
    raise ValueError("no file part")


@contextmanager
def fake_openai() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    batches = fake.batches

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            fake.authorizations.append(self.headers.get("authorization", ""))
            payload = self.rfile.read(length)
            path = self.path.split("?")[0]
            if path.endswith("/files"):
                content, name = _multipart(self.headers["content-type"], payload)
                return self._json(200, batches.upload(content, name))
            if path.endswith("/batches"):
                return self._json(200, batches.create(json.loads(payload)))
            if path.endswith("/cancel"):
                return self._json(200, batches.cancel(path.split("/")[-2]))
            answer = fake.next_answer(json.loads(payload or b"{}"))
            time.sleep(answer.delay)
            body = answer.raw if answer.raw is not None else json.dumps(answer.body or {}).encode()
            self._send(answer.status, body, answer.content_type, answer.headers)

        def do_GET(self) -> None:
            parts = self.path.split("?")[0].rstrip("/").split("/")
            if parts[-1] == "content":
                content = batches.files.get(parts[-2])
                if content is None:
                    return self._json(404, {"error": {"message": "no such file"}})
                return self._send(200, content, "application/octet-stream", {})
            if parts[-1] == "batches":
                return self._json(200, batches.listing())
            return self._json(200, batches.retrieve(parts[-1]))

        def do_DELETE(self) -> None:
            self._json(*batches.delete(self.path.rstrip("/").split("/")[-1]))

        def _json(self, status: int, body: dict[str, Any]) -> None:
            self._send(status, json.dumps(body).encode(), "application/json", {})

        def _send(
            self, status: int, payload: bytes, content_type: str, headers: dict[str, str]
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
