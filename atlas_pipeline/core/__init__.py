"""The shared vocabulary every stage speaks: document statuses and what they mean. Imports only ``config``; never
Dagster, never the stores."""
