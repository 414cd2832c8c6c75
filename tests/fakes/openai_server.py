"""A local fake OpenAI-compatible endpoint answering from a script, for the real ``openai``
client to talk to. Each request takes the next scripted answer (the last one repeats)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        },
        delay=delay,
    )


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
        self.authorizations: list[str] = []
        self._lock = threading.Lock()

    def next_answer(self, body: dict[str, Any]) -> Answer:
        """The responder's answer to this request where one is set, else the script's next."""
        with self._lock:
            self.requests.append(body)
            if self.responder is not None:
                return self.responder(body)
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


@contextmanager
def fake_openai() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            fake.authorizations.append(self.headers.get("authorization", ""))
            answer = fake.next_answer(json.loads(self.rfile.read(length) or b"{}"))
            time.sleep(answer.delay)
            payload = (
                answer.raw if answer.raw is not None else json.dumps(answer.body or {}).encode()
            )
            try:
                self.send_response(answer.status)
                self.send_header("content-type", answer.content_type)
                self.send_header("content-length", str(len(payload)))
                for name, value in answer.headers.items():
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
