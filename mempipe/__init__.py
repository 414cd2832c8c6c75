"""mempipe: the ops-side data pipeline of an agent-memory store."""

from mempipe import redaction

__version__ = "0.1.0"

redaction.install()
