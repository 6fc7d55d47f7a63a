"""Which knowledge base a state (instance, artifacts, exports) belongs to: pointing ``ATLAS_KNOWLEDGE_BASE`` at
another folder never mixes two knowledge bases' documents into one instance or one set of exports — the command is
refused, saying how to start a review of its own (``config.review_folder``)."""

from __future__ import annotations

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import STATE_OWNER_PATH


class StateOwnerError(AtlasError, ValueError):
    """The state in these folders belongs to another knowledge base."""


def claim_state(stores: list[Store], knowledge_base: str, moved: bool = False) -> None:
    """Record ``knowledge_base`` as the owner of each store's state (the first run), or refuse when one of them
    belongs to another — unless ``moved``: the same documents now live there (``atlas run --knowledge-base-moved``).
    Nothing is written when refused."""
    owners = [(store, store.read_json_or(STATE_OWNER_PATH, None)) for store in stores]
    for store, owner in owners:
        if owner is not None and owner.get("knowledge_base") != knowledge_base and not moved:
            raise StateOwnerError(
                f"the state in {store.location} belongs to the knowledge base {owner.get('knowledge_base')}, not "
                f"{knowledge_base}: their documents would be mixed into one instance and one set of exports. Start "
                f"a review of its own — `atlas init DIR --knowledge-base {knowledge_base}`, then `ATLAS_REVIEW=DIR` "
                "(or `atlas --review DIR …`) — or, if the same documents only moved there, run once with "
                "`atlas run --knowledge-base-moved`"
            )
    for store, owner in owners:
        if owner is None or owner.get("knowledge_base") != knowledge_base:
            store.write_json(STATE_OWNER_PATH, {"knowledge_base": knowledge_base, "since": now_iso()})
