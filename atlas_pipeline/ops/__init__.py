"""Running Atlas (the top floor, beside the CLI): the Dagster home and instance config, executors, runs started by the
CLI, the Dagster UI and daemon of ``atlas dev``, migration between deployments, the embedded event log."""
