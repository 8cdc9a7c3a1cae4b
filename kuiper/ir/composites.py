"""Elementwise functions built from the IR's primitives: activations and friends.

Each is written once, here, with the typed constructors of make.py, using the
formulas PyTorch's CPU kernels use and the overflow-safe forms (``exp`` of a
large positive number never happens).  Eager ops, fusion and every code
generator reach them through the same IR, so fused and unfused results agree,
and autodiff differentiates them through their primitives.

Each function takes IR expressions (or Python numbers) and returns one.
"""

from __future__ import annotations

from kuiper.ir import dtypes, make
from kuiper.ir.nodes import IRExpr

# PyTorch's SELU constants (torch/nn/modules/activation.py).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
SQRT_2_OVER_PI = 0.7978845608028654
INV_SQRT_2 = 0.7071067811865476


def as_float(x) -> IRExpr:
    x = make.as_expr(x)
    return make.cast(x, dtypes.to_float(x.dtype))


# --- piecewise linear ---------------------------------------------------------------------------


def relu(x):
    return make.maximum(x, 0)  # an int 0 keeps int tensors int, as torch.relu does


def clamp(x, low=None, high=None):
    """min(max(x, low), high); a None bound is left out."""
    if low is not None:
        x = make.maximum(x, low)
    if high is not None:
        x = make.minimum(x, high)
    return x


def leaky_relu(x, slope):
    return make.select(make.gt(x, 0), x, make.mul(x, slope))


def threshold(x, limit, value):
    """value where x <= limit, else x (so NaN stays NaN, as in PyTorch)."""
    return make.select(make.le(x, limit), value, x)


def hardshrink(x, lambd):
    """0 where -lambd <= x <= lambd, else x (NaN stays NaN, as in PyTorch)."""
    return make.select(make.le(make.call("abs", x), lambd), 0, x)


def softshrink(x, lambd):
    """x minus x clamped to [-lambd, lambd] is exactly the three-piece formula."""
    return make.sub(x, clamp(x, -lambd, lambd))


def hardsigmoid(x):
    return make.div(clamp(make.add(as_float(x), 3), 0, 6), 6)


def hardswish(x):
    x = as_float(x)
    return make.div(make.mul(x, clamp(make.add(x, 3), 0, 6)), 6)


# --- smooth -----------------------------------------------------------------------------------------


def sigmoid(x):
    """1 / (1 + exp(-x)), as PyTorch computes it (exp(-x) overflowing to inf gives 0, as it should)."""
    x = as_float(x)
    return make.div(1, make.add(1, make.call("exp", make.neg(x))))


def silu(x):
    x = as_float(x)
    return make.div(x, make.add(1, make.call("exp", make.neg(x))))


def softplus(x, beta=1.0, limit=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > limit; overflow-safe."""
    x = as_float(x)
    scaled = make.mul(x, beta)
    smooth = make.add(make.maximum(scaled, 0), make.call("log1p", make.call("exp", make.neg(make.call("abs", scaled)))))
    if beta != 1.0:
        smooth = make.div(smooth, beta)
    return make.select(make.gt(scaled, limit), x, smooth)


def log_sigmoid(x):
    """min(x, 0) - log1p(exp(-|x|))."""
    x = as_float(x)
    return make.sub(make.minimum(x, 0), make.call("log1p", make.call("exp", make.neg(make.call("abs", x)))))


def mish(x):
    """x * tanh(softplus(x)); PyTorch's mish uses plain softplus (no threshold)."""
    x = as_float(x)
    soft = make.add(make.maximum(x, 0), make.call("log1p", make.call("exp", make.neg(make.call("abs", x)))))
    return make.mul(x, make.call("tanh", soft))


def softsign(x):
    x = as_float(x)
    return make.div(x, make.add(make.call("abs", x), 1))


def tanhshrink(x):
    x = as_float(x)
    return make.sub(x, make.call("tanh", x))


def elu(x, alpha=1.0, scale=1.0):
    """scale * (x if x > 0 else alpha * expm1(x)); expm1 keeps tiny negatives exact."""
    x = as_float(x)
    negative = make.mul(alpha, make.call("expm1", make.minimum(x, 0)))
    value = make.select(make.gt(x, 0), x, negative)
    return value if scale == 1.0 else make.mul(value, scale)


def selu(x):
    return elu(x, SELU_ALPHA, SELU_SCALE)


def celu(x, alpha=1.0):
    """max(0, x) + min(0, alpha * expm1(x / alpha))."""
    x = as_float(x)
    negative = make.mul(alpha, make.call("expm1", make.div(make.minimum(x, 0), alpha)))
    return make.add(make.maximum(x, 0), make.minimum(negative, 0))


def gelu(x):
    """x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))."""
    x = as_float(x)
    return make.mul(make.mul(x, 0.5), make.add(1, make.call("erf", make.mul(x, INV_SQRT_2))))


def gelu_tanh(x):
    x = as_float(x)
    cube = make.mul(make.mul(make.mul(0.044715, x), x), x)
    inner = make.mul(SQRT_2_OVER_PI, make.add(x, cube))
    return make.mul(make.mul(0.5, x), make.add(1, make.call("tanh", inner)))


# --- PyTorch's small math functions ---------------------------------------------------------------------


def sign(x):
    """torch.sign: (0 < x) - (x < 0), which is 0 for NaN (NumPy's sign gives NaN); identity on bool."""
    x = make.as_expr(x)
    if dtypes.is_bool(x.dtype):
        return x
    return make.sub(make.cast(make.gt(x, 0), x.dtype), make.cast(make.lt(x, 0), x.dtype))


def square(x):
    x = make.as_expr(x)
    if x.dtype == "bool":
        x = make.cast(x, "int64")  # torch.square(bool) is int64
    return make.mul(x, x)


def rsqrt(x):
    return make.div(1, make.call("sqrt", x))


def reciprocal(x):
    return make.div(1, x)
