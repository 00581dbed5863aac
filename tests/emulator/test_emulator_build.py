"""The emulator compiles kernels as tt-metal 0.81's JIT does: C++17, and a compute kernel once per
TRISC thread with only that thread's generated declarations (``chlkc_descriptors.h``)."""

from __future__ import annotations

import pytest

from ttnn_flashdecode.emulator.build import (
    ROLE_COMPUTE, ROLE_READER, TRISC_THREADS, BuildError, KernelBuild, build_kernels,
)

HIFI4_FP32_EXACT = (4, True, False, False)  # (math_fidelity, fp32_dest_acc_en, dst_full_sync_en, approx)


def _build(source: str, role: int = ROLE_COMPUTE) -> str:
    kb = KernelBuild(source_path=None, source_text=source, role=role, compile_time_args=(), named_args=(),
                     defines=(), include_paths=(), compute=HIFI4_FP32_EXACT if role == ROLE_COMPUTE else None,
                     arch="wormhole_b0")
    return build_kernels([kb])[0]


EXP_HEADER = '#include "api/compute/eltwise_unary/exp.h"\n'


def test_build_refuses_approx_outside_math_and_pack():
    # tt-metal declares APPROX under UCK_CHLKC_MATH and UCK_CHLKC_PACK only: TRISC0 cannot build this.
    source = EXP_HEADER + "void kernel_main() { exp_tile_init<APPROX>(); }\n"
    with pytest.raises(BuildError, match="UNPACK thread") as error:
        _build(source)
    assert "APPROX" in str(error.value) and "was not declared" in str(error.value)


def test_build_refuses_math_fidelity_on_the_unpack_thread():
    source = EXP_HEADER + "void kernel_main() { static_assert(MATH_FIDELITY == MathFidelity::HiFi4); }\n"
    with pytest.raises(BuildError, match="UNPACK thread"):
        _build(source)


def test_build_accepts_approx_inside_math():
    source = EXP_HEADER + "void kernel_main() { MATH((exp_tile_init<APPROX>())); PACK(static_assert(!APPROX)); }\n"
    assert _build(source).endswith(".so")


def test_build_compiles_each_thread_with_only_its_own_code():
    # UNPACK(...) code is compiled for TRISC0 alone: a MATH-only name inside it is an error there.
    source = EXP_HEADER + "void kernel_main() { UNPACK((void)APPROX); }\n"
    with pytest.raises(BuildError, match="UNPACK thread"):
        _build(source)
    assert TRISC_THREADS == ("UNPACK", "MATH", "PACK")


@pytest.mark.parametrize("role", [ROLE_READER, ROLE_COMPUTE], ids=["dataflow", "compute"])
def test_build_compiles_kernels_as_cpp17(role):
    # The JIT passes -std=c++17: a C++20 concept must not compile.
    source = "template <class T> concept Any = true;\nvoid kernel_main() {}\n"
    with pytest.raises(BuildError, match="concept"):
        _build(source, role)
    assert _build("static_assert(__cplusplus == 201703L);\nvoid kernel_main() {}\n", role).endswith(".so")
