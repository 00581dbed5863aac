"""The compute kernel's configuration: math fidelity, DST mode, exp mode and ``accurate_scores``
(:class:`ComputeOptions`), what a call's ``compute_kernel_config`` becomes."""

from __future__ import annotations

import dataclasses

import ttnn

from ttnn_flashdecode.op.modifiers.base import as_bool

__all__ = ["ComputeOptions", "check_accurate_scores", "BF16_DST_ROW_SUM_GROUPS"]


def check_accurate_scores(accurate_scores, fp32_dest_acc_en) -> None:
    """Refuse an ``accurate_scores`` that is not a bool, or True with a bfloat16 DST.

    Raises:
        TypeError: not a bool (``numpy.bool_`` is one).
        ValueError: True with ``fp32_dest_acc_en`` False: the scores leave a bfloat16 DST already
            rounded to bfloat16, so a float32 S CB would keep nothing more.
    """
    if as_bool("accurate_scores", accurate_scores) and not fp32_dest_acc_en:
        raise ValueError("accurate_scores: expected a compute config with fp32_dest_acc_en=True (a bfloat16 DST rounds "
                         "the scores to bfloat16 before they are packed), got fp32_dest_acc_en=False")


BF16_DST_ROW_SUM_GROUPS = 4
"""Row-sum chains per block with a bf16 DST (:meth:`ComputeOptions.row_sum_groups`): a 16-tile block's
32 bfloat16 steps as 4 chains of 8 and 3 adds; at most the 8 DST tiles of a bf16 half-sync acquire."""


@dataclasses.dataclass(frozen=True)
class ComputeOptions:
    """The compute kernel's configuration (``ttnn.ComputeConfigDescriptor``) and its exp mode.

    Defaults favour accuracy: HiFi4, fp32 DST accumulation, exact (non-approximate) exp.

    Attributes:
        math_fidelity, fp32_dest_acc_en, math_approx_mode, dst_full_sync_en: the descriptor's fields
            (``math_approx_mode`` is tt-metal's ``APPROX`` for the MATH and PACK threads).
        exp_approx: the softmax's exp: True the LLK's approximate exp, False the accurate one, None
            (default) ``math_approx_mode``'s choice (ttnn's ``SDPAProgramConfig.exp_approx_mode``).
        accurate_scores: the scores S kept in float32 from QS . K^T through the masks to exp (the
            ``accurate_scores`` keyword; ours, ttnn has none): a float32 S CB, each score rounded to
            TF32 to nearest before it is packed; False (default): bfloat16 S, as ttnn. Needs
            ``fp32_dest_acc_en``.

    Raises:
        TypeError: ``math_fidelity`` not a ``ttnn.MathFidelity``; ``fp32_dest_acc_en``,
            ``math_approx_mode``, ``dst_full_sync_en`` or ``accurate_scores`` not a bool;
            ``exp_approx`` not None or a bool (each named).
        ValueError: ``accurate_scores=True`` with ``fp32_dest_acc_en=False``.
    """

    math_fidelity: ttnn.MathFidelity = ttnn.MathFidelity.HiFi4
    fp32_dest_acc_en: bool = True
    math_approx_mode: bool = False
    dst_full_sync_en: bool = False
    exp_approx: bool | None = None
    accurate_scores: bool = False

    def __post_init__(self):
        if not isinstance(self.math_fidelity, ttnn.MathFidelity):
            raise TypeError(f"math_fidelity: expected a ttnn.MathFidelity (LoFi, HiFi2, HiFi3, HiFi4), got "
                            f"{self.math_fidelity!r}")
        for name in ("fp32_dest_acc_en", "math_approx_mode", "dst_full_sync_en"):
            object.__setattr__(self, name, as_bool(name, getattr(self, name)))
        if self.exp_approx is not None:
            object.__setattr__(self, "exp_approx", as_bool("exp_approx", self.exp_approx))
        check_accurate_scores(self.accurate_scores, self.fp32_dest_acc_en)
        # One spelling per program: an exp mode that repeats math_approx_mode's is None (plans key on this).
        if self.exp_approx is not None and bool(self.exp_approx) == bool(self.math_approx_mode):
            object.__setattr__(self, "exp_approx", None)

    @property
    def approx_exp(self) -> bool:
        """Whether the compute kernel's exp is the approximate one (``exp_tile<true>``)."""
        return self.math_approx_mode if self.exp_approx is None else bool(self.exp_approx)

    @property
    def row_scaling_on_sfpu(self) -> bool:
        """Whether the compute kernel multiplies Q by the scale and O by 1/L on the SFPU (fp32) rather
        than the FPU: at LoFi and HiFi2 the FPU multiplies by SrcB's top 7 significant bits only,
        truncated, and both factors sit in SrcB, constant along a row, so every output row would
        share the loss (measured on the emulator: output ~1% low, docs/accuracy.md "By compute config")."""
        return self.math_fidelity in (ttnn.MathFidelity.LoFi, ttnn.MathFidelity.HiFi2)

    def row_sum_groups(self, block_tiles: int) -> int:
        """DST tiles a block's row sums accumulate in before they are added (the compute kernel's
        ``block_row_sums``): 1 with fp32 DST; with a bf16 DST, which rounds every accumulation step to
        bfloat16 so that one chain's error grows with the block, :data:`BF16_DST_ROW_SUM_GROUPS` (at
        most ``block_tiles``). Measured: ``tests/test_attention_adversarial.py::test_bf16_dst_row_sums_of_a_long_block``."""
        return 1 if self.fp32_dest_acc_en else min(BF16_DST_ROW_SUM_GROUPS, block_tiles)

    @property
    def dst_tiles(self) -> int:
        """DST tiles per acquire: 8 (16-bit) / 4 (fp32) in half sync, doubled in full sync (TT_FACTS §6)."""
        tiles = 4 if self.fp32_dest_acc_en else 8
        return tiles * 2 if self.dst_full_sync_en else tiles

    def descriptor(self) -> ttnn.ComputeConfigDescriptor:
        """The ttnn descriptor for these options."""
        return ttnn.ComputeConfigDescriptor(
            math_fidelity=self.math_fidelity,
            math_approx_mode=self.math_approx_mode,
            fp32_dest_acc_en=self.fp32_dest_acc_en,
            dst_full_sync_en=self.dst_full_sync_en,
        )

    @classmethod
    def from_config(cls, config) -> ComputeOptions:
        """From ``None`` (defaults), a :class:`ComputeOptions`, a ``ttnn.ComputeConfigDescriptor``,
        or a ttnn compute-kernel config with the same attribute names.

        Raises:
            TypeError: ``config`` has none of the expected attributes.
        """
        if config is None:
            return _DEFAULT_COMPUTE
        if isinstance(config, cls):
            return config
        try:
            return cls(
                math_fidelity=config.math_fidelity,
                fp32_dest_acc_en=bool(config.fp32_dest_acc_en),
                math_approx_mode=bool(config.math_approx_mode),
                dst_full_sync_en=bool(getattr(config, "dst_full_sync_en", False)),
            )
        except AttributeError as error:
            raise TypeError(
                f"compute_kernel_config: expected None, ComputeOptions or a ttnn compute config, got {type(config).__name__}"
            ) from error


_DEFAULT_COMPUTE = ComputeOptions()
"""The defaults, built once: every call without a compute config looks them up (the fast path too)."""
