"""SQLite's step of each schema version (:mod:`mempipe.migrations`): ``apply(conn)``."""
