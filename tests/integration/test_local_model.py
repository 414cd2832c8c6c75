"""The local model's two encoders are one model: the numpy forward pass a process starts with
and sentence-transformers, which it loads once it has much to encode, give the same vectors and
so the same search results."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from mempipe.adapters.embedding import local
from mempipe.adapters.embedding.minilm_numpy import NumpyMiniLM, token_count

DATA = Path(__file__).parents[3] / "shared" / "data" / "longmemeval-dev" / "turns.jsonl.gz"


def real_turns(count: int) -> list[str]:
    texts: list[str] = []
    with gzip.open(DATA, "rt") as lines:
        for line in lines:
            texts.append(json.loads(line)["content"])
            if len(texts) == count:
                return texts
    return texts


@pytest.fixture(scope="module")
def encoders() -> tuple[NumpyMiniLM, object]:
    return NumpyMiniLM(local._model_path()), local._load()


def test_numpy_and_sentence_transformers_give_the_same_vectors(encoders) -> None:
    numpy_model, torch_model = encoders
    texts = [
        *real_turns(40),
        "",
        "ok",
        "Ünïcödé, emoji 🛫 and CJK 東京 text",
        "a very long turn " * 200,  # past the 256-token limit: truncated alike
    ]
    ours = numpy_model.encode(texts)
    theirs = torch_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == theirs.shape == (len(texts), local.DIMENSIONS)
    assert np.abs(ours - theirs).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_the_same_neighbours_whichever_encoder_embeds_the_query(encoders) -> None:
    numpy_model, torch_model = encoders
    corpus = torch_model.encode(real_turns(120), normalize_embeddings=True)
    for query in ("where do I fly from", "my sister's birthday party", "a recipe with lentils"):
        ours = numpy_model.encode([query])[0]
        theirs = torch_model.encode([query], normalize_embeddings=True)[0]
        assert list(np.argsort(-corpus @ ours)[:10]) == list(np.argsort(-corpus @ theirs)[:10])


def test_a_process_encodes_in_numpy_until_its_tokens_would_have_paid_for_loading_torch(
    monkeypatch,
) -> None:
    """A query, or a small job, in a fresh process never loads torch; once the process has
    encoded its budget of tokens in numpy, the next batch loads sentence-transformers."""
    monkeypatch.setattr(local, "_models", {})
    monkeypatch.setattr(local, "_numpy_tokens", 0)
    query, batch = ["where do I fly from"], real_turns(16)
    encoder = local._numpy_encoder()

    def tokens(texts: list[str]) -> int:
        return token_count(encoder.tokenized(texts))

    monkeypatch.setattr(local, "NUMPY_TOKENS", tokens(query) + tokens(batch) * 3 // 2)
    (vector,) = local.LocalMiniLM().embed(query)
    assert set(local._models) == {"numpy"}, "torch's model was not loaded for one query"
    assert len(vector) == local.DIMENSIONS
    local.LocalMiniLM().embed(batch)
    assert set(local._models) == {"numpy"}, "a batch within the budget stays in numpy"
    local.LocalMiniLM().embed(batch)
    assert local.MODEL_ID in local._models, "the batch past the budget loads sentence-transformers"
