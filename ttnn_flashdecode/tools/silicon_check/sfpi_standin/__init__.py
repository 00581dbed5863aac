"""The SFPI stand-in: ``sfpi.h`` and ``tensix_builtins.h`` for the silicon check's per-thread compute
syntax check where no SFPI install exists (:func:`..toolchain.sfpi_include_dir` picks it by default).

SFPI, Tenstorrent's C++ interface to the Tensix SFPU, is what the ttnn wheel's LLK headers include
as ``sfpi.h``; the wheel does not ship it, and SFPI's headers are not this project's to carry.
These two headers were written for this project from how the wheel's Wormhole B0 and Blackhole
LLK headers call SFPI: each name, type, operator and signature is one a call site needs, every
body an empty placeholder. Compiled with ``-fsyntax-only`` they check that the kernel and the LLK
code it instantiates use SFPI's API in ways these declarations accept.

What they cannot see: anything SFPI's compiler does past parsing (register allocation, ``v_if``
lowering, immediate-operand ranges, scheduling, code size). Where the call sites leave room
(implicit conversions, overloads, optional arguments), the declarations are guesses, and a wrong
guess gives a false error (real SFPI accepts the code) or a false pass (real SFPI refuses it).
``sfpi.h``'s opening comment lists what they check. This package holds no Python code besides
:data:`INCLUDE_DIR`.
"""

from pathlib import Path

#: The folder to put first on the include path (``-I``), with ``-include tensix_builtins.h``.
INCLUDE_DIR = Path(__file__).resolve().parent
