"""The session server's process: ``python -m mempipe.cli.session_server_process`` (a module of
its own, which the ``mempipe.cli`` package does not import, so that running it is clean)."""

from mempipe.cli.session_server import main

if __name__ == "__main__":
    main()
