"""Root conftest: the shared fixtures serve both tests/ and benchmarks/."""

pytest_plugins = ["tests.fixtures"]
