"""ttnn's decode calls as drop-ins (``ttnn_flashdecode.transformer.scaled_dot_product_attention_decode``
and ``paged_scaled_dot_product_attention_decode``): the public name of
:mod:`ttnn_flashdecode.op.transformer`, where they live."""

from ttnn_flashdecode.op.transformer import *  # noqa: F401,F403
from ttnn_flashdecode.op.transformer import __all__  # noqa: F401
