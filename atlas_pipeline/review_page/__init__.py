"""The review page: a Starlette app over one deployment (``atlas review``, ``atlas dev``) where a person approves,
corrects or rejects each value beside its evidence. An app on the top floor: the decisions, final values and evidence
it shows live in the ``review`` library."""
