"""Running Atlas: settings (one model), the Dagster home and instance config, executors, runs started by the
CLI, secrets kept out of logs, and migration between deployments."""
