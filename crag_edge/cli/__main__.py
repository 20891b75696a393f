"""`python -m crag_edge.cli`: the same as the `crag-edge` command."""

from crag_edge.cli import main

main()
