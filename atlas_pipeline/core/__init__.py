"""The shared vocabulary every stage speaks: document statuses (``statuses``), templates and their fields
(``templates``) and the consistency checks a template declares (``checks``). Imports only ``config``; never Dagster,
never the stores."""
