"""Prefect tasks: each one I/O step a flow composes, wrapping a service. A task's body takes a
unit of work and is given it by :func:`mempipe.bootstrap.given_store`: the task itself takes the
store's URL, not a connection, so it stays picklable for distributed runners and is never cached
on a client; each states its retries and cache policy on the decorator."""
