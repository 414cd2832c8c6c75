"""The store port and its backends, chosen by URL."""

from __future__ import annotations

from mempipe.adapters.store.base import Store, StoreCapabilities
from mempipe.adapters.store.factory import open_store

__all__ = ["Store", "StoreCapabilities", "open_store"]
