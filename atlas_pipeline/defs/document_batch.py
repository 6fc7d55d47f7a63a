"""The documents of one step: one partition (a sensor run) or a range (a batched run), worked on one by one, with
each document's metadata recorded against its own partition.

Dagster's ``context.add_asset_metadata(..., partition_key=k)`` checks ``k`` against the run's partition range by
listing every dynamic partition of the instance and looking up the range's ends — about 15 ms a call with a hundred
documents, growing with the knowledge base, and a batched run makes one call per document and asset. The run's keys
do not change during a step, so :class:`DocumentBatch` reads them once, checks against them, and hands the metadata
to the same place Dagster's method does (the step's metadata accumulator, from which the materialisation events of
each partition are built). Without that accumulator (another Dagster version) it uses the public method.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import dagster as dg

from atlas_pipeline.core.redaction import redact, secrets_masked_in_errors
from atlas_pipeline.dagster_internals import add_step_metadata, step_of

T = TypeVar("T")


class DocumentBatch:
    """The partition keys of the running step, read once."""

    def __init__(self, context: dg.AssetExecutionContext) -> None:
        self.context = context
        self.keys: list[str] = list(context.partition_keys)
        self._known = frozenset(self.keys)
        self._step = step_of(context)

    @property
    def single(self) -> bool:
        """One document (what the sensor requests): its own run, logs and data version."""
        return len(self.keys) == 1

    @property
    def records_directly(self) -> bool:
        """Whether metadata goes straight to the step's accumulator (else through ``add_asset_metadata``)."""
        return self._step is not None

    def add_metadata(self, key: str, metadata: Mapping[str, Any], asset: str | None = None) -> None:
        """Record ``metadata`` on document ``key``'s materialisation of ``asset`` (the step's only asset if None)."""
        if key not in self._known:
            raise dg.DagsterInvariantViolationError(f"document {key!r} is not one of this run's partitions")
        if self._step is None:
            self.context.add_asset_metadata(metadata, asset_key=asset, partition_key=key)
            return
        assets_def = self._step.assets_def
        asset_key = dg.AssetKey.from_coercible(asset) if asset else assets_def.key
        if asset_key not in assets_def.keys:
            raise dg.DagsterInvariantViolationError(f"asset {asset_key.to_user_string()!r} is not in this step")
        add_step_metadata(self._step, asset_key, key, metadata)

    def each(self, work: Callable[[str], T], parallel: int = 1) -> dict[str, T]:
        """``work(key)`` for every document, ``parallel`` at a time (threads: for work that waits on an endpoint,
        not for CPU). In a batched run a document that raises does not stop the others: the step fails at the end
        naming them (``atlas run`` then gives those documents a run each)."""
        if self.single:
            with secrets_masked_in_errors():
                return {self.keys[0]: work(self.keys[0])}

        def attempt(key: str) -> tuple[bool, T | str]:
            try:
                return True, work(key)
            except Exception as error:  # reported below with the key; the step still fails
                return False, redact(f"{type(error).__name__}: {error}")

        if parallel > 1:
            with ThreadPoolExecutor(max_workers=min(parallel, len(self.keys)), thread_name_prefix="atlas-doc") as pool:
                outcomes = dict(zip(self.keys, pool.map(attempt, self.keys), strict=True))
        else:
            outcomes = {key: attempt(key) for key in self.keys}
        results: dict[str, T] = {key: value for key, (ok, value) in outcomes.items() if ok}  # type: ignore[misc]
        errors: dict[str, str] = {key: str(value) for key, (ok, value) in outcomes.items() if not ok}
        for key, message in errors.items():
            self.context.log.error(f"{key}: {message}")
        if errors:
            listed = "; ".join(f"{key}: {message}" for key, message in list(errors.items())[:5])
            raise dg.Failure(description=f"{len(errors)} of {len(self.keys)} documents of this batch raised: {listed}")
        return results
