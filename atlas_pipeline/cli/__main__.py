"""``python -m atlas_pipeline.cli``: the ``atlas`` command."""

import sys

from atlas_pipeline.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
