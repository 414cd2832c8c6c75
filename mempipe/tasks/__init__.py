"""Prefect tasks: each one I/O step a flow composes, wrapping a service. Tasks take the store's
URL, not a connection, so they stay picklable for distributed runners and are never cached on a
client; each states its retries and cache policy on the decorator."""
