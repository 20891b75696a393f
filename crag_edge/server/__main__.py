from crag_edge.server.cli import main

main()
