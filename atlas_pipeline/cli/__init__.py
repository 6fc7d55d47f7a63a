"""The ``atlas`` command line, one module per command (``main`` holds the arguments): run the whole pipeline,
print task completion, open the UI, show settings, migrate."""

from atlas_pipeline.cli.main import main

__all__ = ["main"]
