"""mempipe: the ops-side data pipeline of an agent-memory store."""

__version__ = "0.1.0"
