"""``python -m ttnn_flashdecode.demo`` (same as ``python -m ttnn_flashdecode demo``)."""

import sys

from . import main

sys.exit(main())
