"""``python -m llmath``: the same as the ``llmath`` command."""

from llmath.cli import main

main()
