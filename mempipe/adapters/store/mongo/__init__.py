"""The MongoDB implementation of the store port (Atlas, or self-managed 8.2+ with mongot)."""
