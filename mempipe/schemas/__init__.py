"""Pydantic models: the single source of truth for records, configuration and summaries."""
