"""The store port and its backends, chosen by URL."""

from __future__ import annotations

from mempipe.adapters.store.base import Store
from mempipe.adapters.store.factory import open_store

__all__ = ["Store", "open_store"]
