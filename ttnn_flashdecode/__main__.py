"""``python -m ttnn_flashdecode <command> [args...]``: see :mod:`ttnn_flashdecode.cli`."""

import sys

from ttnn_flashdecode.cli import main

if __name__ == "__main__":
    sys.exit(main())
