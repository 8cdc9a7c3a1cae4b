"""A matrix product's one-input epilogue as oneDNN post-ops, where its math is one oneDNN knows.

The fusion pass gives a product whose operands arrive per call (``AddMatrixProduct``: JAX's Dense,
kuiper/graph/bias_inputs.py) the elementwise math that read its output (kuiper/graph/fusion.py);
oneDNN's matmul then applies it as each result is stored, instead of a pass over the whole output.
What a conv's post-ops know (ReLU, SiLU, sigmoid, exact GELU, clips: conv_post_ops.py) is found the
same way here, and the tanh-approximated GELU besides, in the two spellings it arrives in: PyTorch's
(``composites.gelu_tanh``) and JAX's ``jax.nn.gelu`` (``x * ((tanh((x + x*x*x * 0.044715) *
sqrt(2/pi)) + 1) * 0.5)``, Flax's ``nn.gelu``).  A match is structural equality of the simplified IR,
never a guess.  oneDNN's tanh is its own: the results are as close to float64's as the compiled
elementwise op's, not the same bits (tests/numba_kernels/test_matmul_epilogue.py).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..ir import composites, make
from ..ir.nodes import Assign
from ..ops.elementwise import ElementwiseMath, function_for
from . import conv_post_ops

FLOAT32 = "float32"
GELU_TANH = ("eltwise_gelu_tanh", 0.0, 0.0)


def _jax_gelu_tanh(x):
    """jax.nn.gelu(x, approximate=True) as JAX lowers it to HLO, its constants rounded to float32."""
    cube = make.mul(make.mul(make.mul(x, x), x), float(np.float32(0.044715)))
    inner = make.mul(make.add(x, cube), float(np.float32(math.sqrt(2.0 / math.pi))))
    return make.mul(x, make.mul(make.add(make.call("tanh", inner), 1.0), 0.5))


_GELU_TANH_SPELLINGS = (composites.gelu_tanh, _jax_gelu_tanh)


def _value(epilogue: ElementwiseMath):
    """The expression a one-input float32 epilogue assigns, or None."""
    statements = function_for(epilogue, (FLOAT32,)).body.stmts
    return statements[0].value if len(statements) == 1 and isinstance(statements[0], Assign) else None


@functools.cache
def _gelu_tanh_values() -> tuple:
    return tuple(_value(ElementwiseMath(build, 1)) for build in _GELU_TANH_SPELLINGS)


def post_ops_for(epilogue: ElementwiseMath | None) -> tuple | None:
    """The post-op steps computing a one-input ``epilogue`` of the product's result; () for none; None where
    oneDNN has no such steps (the epilogue then runs after the product)."""
    if epilogue is None:
        return ()
    if epilogue.arity != 1:
        return None
    steps = conv_post_ops.post_ops_for(epilogue, 0)
    if steps is not None:
        return steps
    value = _value(epilogue)
    return (GELU_TANH,) if value is not None and value in _gelu_tanh_values() else None
