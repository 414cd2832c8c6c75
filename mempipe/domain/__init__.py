"""Domain rules as plain Python: importable and testable without Prefect or a database."""
