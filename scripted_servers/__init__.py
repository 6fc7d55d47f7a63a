"""The servers the tests and the benchmarks run as child processes on 127.0.0.1 — a scripted OpenAI-compatible
endpoint, an RSS feed site, a parsing provider following MinerU's and docling-serve's APIs, PostgreSQL, an
S3-compatible server (moto), Redis and a Celery cluster — shared by ``atlas_pipeline_tests`` and ``bench`` alike.
Each is stopped by its own pid."""
