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


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Answer] = []
        self.responder: Callable[[dict[str, Any]], Answer] | None = None
        self.requests: list[dict[str, Any]] = []
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
            answer = fake.next_answer(json.loads(self.rfile.read(length) or b"{}"))
            time.sleep(answer.delay)
            payload = json.dumps(answer.body or {}).encode()
            try:
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
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
