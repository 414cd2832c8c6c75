"""The replay job's services: extraction and reconciliation (``extract``), the same through a
provider's Batch API (``provider_batch``), work taken per owner (``owner_work``), the run's
summary, and its plan, preview and preview page."""
