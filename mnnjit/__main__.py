"""``python -m mnnjit``: the ``mnnjit`` command (see :mod:`mnnjit.cli`)."""
import sys

from mnnjit.cli import main

if __name__ == "__main__":
    sys.exit(main())
