"""ttnn's MLA decode calls as drop-ins: ``flash_multi_latent_attention_decode`` and
``paged_flash_multi_latent_attention_decode`` (ttnn 0.81's signatures), the GQA drop-ins with the
latent as K and V and the output cut to ``head_dim_v`` columns (:mod:`ttnn_flashdecode.op.latent`
says why that is MLA and what it costs)."""

from __future__ import annotations

from ttnn_flashdecode.op.latent import keep_value_columns, values_for
from ttnn_flashdecode.op.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode

__all__ = ["flash_multi_latent_attention_decode", "paged_flash_multi_latent_attention_decode"]


def _mla(drop_in, q, k, v, head_dim_v, keywords, *, append_latent=None):
    """The GQA ``drop_in`` on the latent (V = K's first ``head_dim_v`` columns, or ``v`` padded), the
    output cut to ``head_dim_v`` columns; ``append_latent`` goes to the drop-in as ``append_k`` (V is
    K: one cache, appended once), its refusals named ``append_latent``."""
    if head_dim_v is None:
        raise TypeError("head_dim_v: the MLA call needs V's head_dim (DeepSeek-V3: 512), got None")
    if append_latent is not None:
        if v is not None:
            raise ValueError("append_latent: expected input_tensor_v None (V is the latent's first head_dim_v "
                             "columns, one cache); a separate V cache is not appended")
        keywords = keywords | {"append_k": append_latent}
    try:
        out = drop_in(q, k, values_for(k, v, head_dim_v), **keywords)
    except (TypeError, ValueError) as error:
        if append_latent is None or not str(error).startswith("append_k:"):
            raise
        raise type(error)("append_latent:" + str(error)[len("append_k:"):]) from error
    return keep_value_columns(out, int(head_dim_v))


def flash_multi_latent_attention_decode(
    input_tensor_q,
    input_tensor_k,
    input_tensor_v=None,
    head_dim_v=None,
    *,
    is_causal: bool = True,
    attn_mask=None,
    cur_pos=None,
    cur_pos_tensor=None,
    attention_sink=None,
    scale: float | None = None,
    sliding_window_size=None,
    memory_config=None,
    program_config=None,
    compute_kernel_config=None,
    return_lse: bool = False,
    sparse_indices=None,
    append_latent=None,
):
    """MLA decode with ``ttnn.transformer.flash_multi_latent_attention_decode``'s call.

    Args:
        input_tensor_q: ``[1, b, nh, dh]`` (DeepSeek-V3: ``nh = 128`` per device, ``dh = 576``), as
            :func:`~ttnn_flashdecode.transformer.scaled_dot_product_attention_decode` takes Q.
        input_tensor_k: the latent cache ``[b, nkv, s, dh]`` (MLA: ``nkv = 1``), bfloat16,
            bfloat8_b or bfloat4_b.
        input_tensor_v: None (V = the first ``head_dim_v`` columns of K, MLA's case) or
            ``[b, nkv, s, head_dim_v]``.
        head_dim_v: V's head_dim (DeepSeek-V3: 512), ``1..dh``; required.
        is_causal, attn_mask, cur_pos, cur_pos_tensor, attention_sink, scale (default
            ``1/sqrt(dh)``, Q's head_dim, as ttnn), sliding_window_size, memory_config,
            program_config, compute_kernel_config: as the GQA drop-in takes them (ttnn's meaning,
            its scaling of sinks and masks by ``scale`` included).
        return_lse: this op's extra keyword: ``(out, lse)``, ``lse`` float32 ``[1, b, nh]``.
        sparse_indices: this op's extra keyword: DeepSeek-V3.2's sparse decode, int32 ``[b, k]``
            (or ``[b, 1, k]``): each user attends exactly the listed latent rows
            (:func:`ttnn_flashdecode.attention`, ``docs/options.md#sparse_indices``).
        append_latent: this op's extra keyword: each user's new latent row ``[1, b, nkv, dh]``
            (ttnn's ``update_cache`` input), written into the cache at its ``cur_pos`` and attended,
            bit for bit ttnn's update then this call (docs/options.md "append_k, append_v,
            append_latent"); with ``input_tensor_v`` None only. None (default): no append.

    Returns:
        ``[1, b, nh, head_dim_v]``, the kind of Q (``(out, lse)`` with ``return_lse``).

    Raises:
        TypeError: no ``head_dim_v``, or not an int; as the GQA drop-in.
        ValueError: ``head_dim_v`` outside ``1..dh``, a V that is not K's shape with ``head_dim_v``
            columns, ``append_latent`` with a V; as the GQA drop-in (its ``append_k`` refusals
            named ``append_latent``).
    """
    return _mla(scaled_dot_product_attention_decode, input_tensor_q, input_tensor_k, input_tensor_v, head_dim_v,
                dict(is_causal=is_causal, attn_mask=attn_mask, cur_pos=cur_pos, cur_pos_tensor=cur_pos_tensor,
                     attention_sink=attention_sink, scale=scale, sliding_window_size=sliding_window_size,
                     memory_config=memory_config, program_config=program_config,
                     compute_kernel_config=compute_kernel_config, return_lse=return_lse,
                     sparse_indices=sparse_indices), append_latent=append_latent)


def paged_flash_multi_latent_attention_decode(
    input_tensor_q,
    input_tensor_k,
    input_tensor_v=None,
    head_dim_v=None,
    page_table_tensor=None,
    *,
    is_causal: bool = True,
    attn_mask=None,
    cur_pos_tensor=None,
    attention_sink=None,
    scale: float | None = None,
    sliding_window_size=None,
    memory_config=None,
    program_config=None,
    compute_kernel_config=None,
    return_lse: bool = False,
    sparse_indices=None,
    append_latent=None,
):
    """MLA decode on a paged latent cache, with ``ttnn.transformer.paged_flash_multi_latent_attention_decode``'s call.

    Args:
        input_tensor_q: ``[1, b, nh, dh]``, as :func:`flash_multi_latent_attention_decode`.
        input_tensor_k: the paged latent cache ``[blocks, nkv, block_size, dh]``.
        input_tensor_v: None (V = K's first ``head_dim_v`` columns) or ``[blocks, nkv, block_size, head_dim_v]``.
        head_dim_v: V's head_dim, required.
        page_table_tensor: int32 ``[b, blocks_per_user]``, required (as the paged GQA drop-in).
        is_causal, attn_mask, cur_pos_tensor (required when causal), attention_sink, scale,
            sliding_window_size, memory_config, program_config, compute_kernel_config, return_lse,
            sparse_indices: as :func:`flash_multi_latent_attention_decode` (each index through the
            page table).
            append_latent: as :func:`flash_multi_latent_attention_decode` (the append through the
            page table, ttnn's ``paged_update_cache``).

    Returns:
        ``[1, b, nh, head_dim_v]``, the kind of Q (``(out, lse)`` with ``return_lse``).

    Raises:
        TypeError, ValueError: as :func:`flash_multi_latent_attention_decode` and the paged GQA drop-in.
    """
    def paged(q, k, v, **keywords):
        return paged_scaled_dot_product_attention_decode(q, k, v, page_table_tensor, **keywords)

    return _mla(paged, input_tensor_q, input_tensor_k, input_tensor_v, head_dim_v,
                dict(is_causal=is_causal, attn_mask=attn_mask, cur_pos_tensor=cur_pos_tensor,
                     attention_sink=attention_sink, scale=scale, sliding_window_size=sliding_window_size,
                     memory_config=memory_config, program_config=program_config,
                     compute_kernel_config=compute_kernel_config, return_lse=return_lse,
                     sparse_indices=sparse_indices), append_latent=append_latent)
