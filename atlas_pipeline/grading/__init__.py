"""Grading: what a reviewer can trust about each extracted value.

- ``text``: the typography-blind token view of a document that quotes are compared in;
- ``quotes``: ``match_quote`` — is a quote in the document, up to typography, and where;
- ``values``: is the value written in (supported by) its own quote;
- ``consistency``: the template's declared checks between values (events ≤ totals, CI bounds, …);
- ``locations``: where a person can see the evidence (span in the text, or table and row, and page);
- ``fields``: one field graded from the model's answer, and a document's completeness and status.
"""
