"""``python -m llmath.cli``: the same as the ``llmath`` command."""

from llmath.cli import main

main()
