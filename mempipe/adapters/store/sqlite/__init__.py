"""Embedded default backend: one SQLite file through apsw, with sqlite-vec and FTS5, in WAL."""
