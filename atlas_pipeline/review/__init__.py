"""People deciding on extracted values: the decision log (``decisions``), final values with provenance
(``final_values``), what the decisions teach (``quality``), evidence in context (``evidence``) and reviewed workbooks
(``workbook_import``). The page people decide on is an app of its own: ``review_page``."""
