"""Prefect tasks: each one I/O step a flow composes, wrapping a service. A task takes the
store's public URL (``store_url``), not a connection, so it stays picklable for distributed
runners and is never cached on a client, and opens its unit of work in its body
(``with unit_of_work(store_url) as uow:``); one that asks a provider writes what it spent as it
ends (``spend_recorded``). Each states its retries and cache policy on the decorator."""
