"""The error a model runtime raises for a file it cannot use; it imports nothing, so every
runtime (ONNX, llama.cpp) can raise it without importing another."""


class ModelFileError(ValueError):
    """A model file is present but unusable (corrupt, or not the format its runtime reads);
    the message says how to fetch a verified copy."""
