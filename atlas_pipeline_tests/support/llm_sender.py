"""A process that sends LLM requests from several threads through the request gate (for tests of a limit that
holds across processes): ``python -m atlas_pipeline_tests.support.llm_sender BASE_URL GATE_DIR LIMIT THREADS``; prints
``sent N`` when every request was answered. With ``--hold`` it takes one slot and sleeps (to be killed); with
``--database URL`` its gate is on that PostgreSQL database (shared by every machine) instead of ``GATE_DIR``."""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel

from atlas_pipeline.extraction.llm import LLMClient, LLMConfig

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


class Answer(BaseModel):
    ok: bool


def client(base_url: str, gate_dir: str, limit: int, **config) -> LLMClient:
    settings = LLMConfig(base_url=base_url, model="scripted-model", concurrency=limit, gate_dir=gate_dir, **config)
    return LLMClient(settings)


def send(llm: LLMClient, count: int, tag: str = "") -> int:
    """``count`` distinct requests from ``count`` threads; how many were answered."""

    def one(number: int) -> bool:
        messages = [{"role": "user", "content": f"request {tag}{os.getpid()}-{number}"}]
        return llm.complete(messages, SCHEMA, Answer).data["ok"]

    with ThreadPoolExecutor(max_workers=count) as pool:
        return sum(pool.map(one, range(count)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("gate_dir")
    parser.add_argument("limit", type=int)
    parser.add_argument("threads", type=int)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--database", default="")
    args = parser.parse_args()
    if args.hold:
        llm = client(args.base_url, args.gate_dir, args.limit, gate_url=args.database)
        with llm.transport.gate.slot():
            Path(args.gate_dir, "holding").write_text(str(os.getpid()))
            time.sleep(600)
        return
    llm = client(args.base_url, args.gate_dir, args.limit, backoff_seconds=0.05, gate_url=args.database)
    print(f"sent {send(llm, args.threads)}")


if __name__ == "__main__":
    main()
