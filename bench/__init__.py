"""Benchmarks: each module runs with `python -m bench.<name>` from the repository root and writes a report."""
