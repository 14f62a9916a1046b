"""Where gpubot's data files are: inside the ``bot`` package, so that a wheel carries them.

``bot/templates`` is a symbolic link to the repository's ``templates/`` in a checkout;
building a wheel copies what it points to into the package (pyproject.toml's
package-data), so an installed gpubot finds its templates at the same place.
``GPUBOT_TEMPLATES`` points elsewhere (to try edited templates without reinstalling).
"""

from __future__ import annotations

import os
from pathlib import Path

TEMPLATE_DIR = Path(os.environ.get("GPUBOT_TEMPLATES") or Path(__file__).resolve().parent
                    / "templates")
