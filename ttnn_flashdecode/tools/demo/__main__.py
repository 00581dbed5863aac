"""``python -m ttnn_flashdecode.tools.demo`` (same as ``python -m ttnn_flashdecode demo``)."""

import sys

from . import main

sys.exit(main())
