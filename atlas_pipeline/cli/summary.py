"""What `atlas run` and `atlas status` print: the documents' states and the task completion."""

from __future__ import annotations


def document_states(instance, deployment, only=None):
    """Where the documents stand (``defs.document_states``), Dagster loaded only when asked."""
    from atlas_pipeline.defs.document_states import document_states as states

    return states(instance, deployment, only)


def print_summary(states) -> None:
    from atlas_pipeline.outputs.completion import summarise

    for line in summarise(states).lines():
        print(line)
    problems = [s for s in states if s.status.value in ("failed", "skipped", "cancelled", "pending", "extracting")]
    for state in problems:
        print(f"  - {state.key}: {state.status.value}: {state.reason}")
    for state in (s for s in states if s.source_removed):
        print(f"  - {state.key}: source removed from the knowledge base ({state.source_path}); its results are kept")


def run_cost(records) -> str:
    """What this run's LLM requests cost (answers from the cache are free)."""
    from atlas_pipeline.extraction.prices import money

    calls = sum(r.llm_calls for r in records)
    priced = [r for r in records if r.llm_calls and r.cost_paid is not None]
    unpriced = sum(1 for r in records if r.llm_calls and r.cost_paid is None)
    currency = next((r.cost_currency for r in priced if r.cost_currency), "USD")
    line = (
        f"LLM this run: {calls} request(s), {sum(r.llm_cache_hits for r in records)} answered by the cache, "
        f"paid {money(sum(r.cost_paid for r in priced), currency)}"
    )
    return line + (f" ({unpriced} document(s) by a model with no price: not counted)" if unpriced else "")
