"""What the pipeline hands to people: task completion figures and the export files (xlsx, csv, parquet, jsonl)."""
