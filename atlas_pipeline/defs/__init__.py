"""Dagster definitions: assets, sensors and jobs that orchestrate the plain modules of ``atlas_pipeline``."""
