"""People deciding on extracted values: the decision log (``decisions``), final values with provenance
(``outcome``), what the decisions teach (``quality``), evidence in context (``evidence``), reviewed workbooks
(``workbook_import``) and the review page (``app``)."""
