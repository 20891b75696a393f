"""What every crag-edge command line shares (the main CLI, `serve`, `tokens`, `evaluator`,
`tui`): errors said in one line (`errors`), text printed as written (`output`), and the
common options (`options`)."""
