"""ttnn's decode calls as drop-ins (``ttnn_flashdecode.transformer.scaled_dot_product_attention_decode``,
``paged_scaled_dot_product_attention_decode``, ``flash_multi_latent_attention_decode`` and
``paged_flash_multi_latent_attention_decode``): the public name of :mod:`ttnn_flashdecode.op.transformer`
and :mod:`ttnn_flashdecode.op.mla`, where they live."""

from ttnn_flashdecode.op import mla as _mla
from ttnn_flashdecode.op import transformer as _gqa
from ttnn_flashdecode.op.mla import *  # noqa: F401,F403
from ttnn_flashdecode.op.transformer import *  # noqa: F401,F403

__all__ = [*_gqa.__all__, *_mla.__all__]
