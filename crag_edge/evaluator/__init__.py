"""The default retrieval evaluator, shipped as package data (no download needed).

`model.int8.onnx`, `tokenizer.json`, `config.json` and `MODEL_CARD.md` here are the output
of `crag-edge evaluator train` on SciFact (see the card for the exact command, data licences
and metrics). The built-in manifest lists them with `package` sources, so
`crag-edge models pull` copies and sha256-verifies them into the model folder like any model.
"""
