"""One dynamic partition per document, added by the knowledge-base sensor (or ``atlas run``)."""

import dagster as dg

documents_partitions = dg.DynamicPartitionsDefinition(name="documents")
