"""`python -m pipeline.cli`: the `brainstream` command."""

from pipeline.cli import main

main()
