"""ttnn-flashdecode: flash-decode GQA attention for TT-NN, with a host emulator for its kernels.

``attention(q, k, v, cur_pos=[...])`` runs on a Tenstorrent device through ``ttnn.generic_op``
when given device tensors, and on the host emulator (the real kernel sources compiled for the
CPU) otherwise. It is also registered with ttnn as ``ttnn.flashdecode.attention``, with a
float64 golden function (:func:`ttnn_flashdecode.op.reference.attention_reference`).
"""

import os as _os
import sys as _sys

# ``python -m ttnn_flashdecode <command>`` imports this package before its __main__, while
# sys.argv[0] is "-m" (Python's documented value while it locates the module). ttnn logs its whole
# config at DEBUG when first imported, and a command's output is its report: quiet it to INFO then,
# and only then (an import from a program leaves its logging alone). LOGURU_LEVEL set by the caller wins.
if _sys.argv[:1] == ["-m"] and "loguru" not in _sys.modules:
    _os.environ.setdefault("LOGURU_LEVEL", "INFO")

import ttnn as _ttnn  # noqa: E402

from ttnn_flashdecode.op.context_parallel import context_parallel_attention  # noqa: E402
from ttnn_flashdecode.op.devices import ensure_host_context  # noqa: E402
from ttnn_flashdecode.op.merge import merge_attention_states  # noqa: E402
from ttnn_flashdecode.op.operation import attention, last_report  # noqa: E402
from ttnn_flashdecode.op.reference import attention_reference  # noqa: E402
from ttnn_flashdecode.op.compute_options import ComputeOptions  # noqa: E402
from ttnn_flashdecode.op.sparse import sparse_reference  # noqa: E402

__all__ = ["ComputeOptions", "attention", "attention_reference", "context_parallel_attention", "ensure_host_context",
           "last_report", "merge_attention_states", "sparse_reference"]


def _golden(q, k, v, *, cur_pos=None, chunk_start=None, rows=None, scale=None, **_):
    return attention_reference(q, k, v, cur_pos=cur_pos, chunk_start=chunk_start, rows=rows, scale=scale)


def _register() -> None:
    namespace = getattr(_ttnn, "flashdecode", None)
    if namespace is not None and hasattr(namespace, "attention"):
        return  # already registered (module re-import)
    _ttnn.register_python_operation(name="ttnn.flashdecode.attention", golden_function=_golden)(attention)


_register()

# ``ttnn_flashdecode.transformer.scaled_dot_product_attention_decode(...)`` after a plain
# ``import ttnn_flashdecode``, as ``ttnn.transformer...`` works after ``import ttnn``.
from ttnn_flashdecode import transformer  # noqa: E402,F401
