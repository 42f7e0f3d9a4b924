"""Where the ``../shared`` directory is (models, reference docs, tools): ``MNNJIT_SHARED`` when
set, else the directory beside the project checkout. Test modules import it by name (pytest puts
``tests/`` on ``sys.path`` for its root ``conftest.py``)."""
from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("MNNJIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
#: real MNN's converted models with their inputs and outputs (``MANIFEST.json``)
MODELS = str(SHARED / "models")
#: real MNN's converter, called directly (never the ``mnnconvert`` console script)
CONVERTER = str(SHARED / "tools" / "mnn_oracle_convert.py")
