"""ttnn-flashdecode: flash-decode GQA attention for TT-NN, with a host emulator for its kernels.

``attention(q, k, v, cur_pos=[...])`` runs on a Tenstorrent device through ``ttnn.generic_op``
when given device tensors, and on the host emulator (the real kernel sources compiled for the
CPU) otherwise. It is also registered with ttnn as ``ttnn.flashdecode.attention``, with a
float64 golden function (:func:`ttnn_flashdecode.op.reference.attention_reference`).
"""

import ttnn as _ttnn

from ttnn_flashdecode.op.context_parallel import context_parallel_attention
from ttnn_flashdecode.op.merge import merge_attention_states
from ttnn_flashdecode.op.operation import attention, last_report
from ttnn_flashdecode.op.reference import attention_reference

__all__ = ["attention", "attention_reference", "context_parallel_attention", "last_report", "merge_attention_states"]


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
