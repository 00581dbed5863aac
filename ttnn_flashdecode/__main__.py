"""``python -m ttnn_flashdecode <command> [args...]``: see :mod:`ttnn_flashdecode.tools.cli`."""

import os
import sys

# ttnn logs its whole config at DEBUG when imported; a command's output is its report. Set
# LOGURU_LEVEL yourself to see it (loguru reads the variable when it is first imported).
os.environ.setdefault("LOGURU_LEVEL", "INFO")

from ttnn_flashdecode.tools.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
