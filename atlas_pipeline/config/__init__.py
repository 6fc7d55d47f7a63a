"""The ground floor: settings (one validated model of the ``ATLAS_*`` variables), secrets kept out of every text, and
which Host names the local web servers answer. Imports nothing else of Atlas and never Dagster."""
