"""Benchmarks: metis beside the official SDKs and LiteLLM, and beside the floor.

Run ``python -m benchmarks`` (``--quick`` for a shorter run, ``--json out.json`` to keep the
numbers); see benchmarks/README.md. Not part of the test suite, and never a runtime dependency.
"""
