"""``python -m llmath.cli``: the same as the ``llmath`` command."""

from llmath.cli.app import main

main()
