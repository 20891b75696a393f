"""Root conftest: the shared fixtures serve both tests/ and benchmarks/.

Tests never load the 1.1 GB default LLM: where an LLM is needed, the small one serves
(`make test` pulls only it).
"""

import os

os.environ.setdefault("CRAG_EDGE_LLM", "smollm2-135m-instruct")

pytest_plugins = ["tests.fixtures", "tests.postgres"]
