"""The backfill job's services: reading archives into turns (``ingest``), the run's summary
(``summary``), and its plan."""
