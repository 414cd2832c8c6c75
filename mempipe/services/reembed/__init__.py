"""The re-embed job's services: filling a model's vectors and the recall gate (``fill``), the
same through a provider's Batch API (``provider_batch``), and its plan."""
