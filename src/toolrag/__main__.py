"""`python -m toolrag`: the same command line as `toolrag`."""

from toolrag.cli.app import main

main()
