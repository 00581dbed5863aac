"""``python -m ttnn_flashdecode <command> [args...]``: see :mod:`ttnn_flashdecode.tools.cli` (the package's
``__init__`` quiets ttnn's import-time DEBUG config for these commands)."""

import sys

from ttnn_flashdecode.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
