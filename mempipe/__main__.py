"""``python -m mempipe``: the same CLI as the ``mempipe`` command."""

from mempipe.cli import main

main()
