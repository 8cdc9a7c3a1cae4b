"""Activations: functions of one tensor, mostly elementwise (softmax works along a dim).

Every elementwise activation also says, through ``elementwise_expression``,
how to write it as a PNNX-syntax expression over ``@0``, so that the graph's
fusion pass can fold it into a neighbouring ``pnnx.Expression``.  Param values
are baked into that expression as ``repr(float)`` literals.  The expression
returns None whenever the params are missing or invalid, so the op is built
normally and ``setup()`` reports the problem at build time.

Formulas are written to avoid overflow (``exp`` of a large positive number):
sigmoid and softplus go through ``exp(-|x|)``, softmax subtracts the max.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from .base import Op, normalize_axis

# PyTorch's SELU constants (torch/nn/modules/activation.py).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2 = 1.0 / math.sqrt(2.0)


# -- helpers shared by forward() and elementwise_expression() ----------------------


def literal(value: float) -> str:
    """A float as an expression literal (``repr`` round-trips; gives ``inf``/``-inf``/``nan``)."""
    return repr(float(value))


def node_number(node, key: str, default=None) -> float | None:
    """A numeric param read leniently for ``elementwise_expression``: None when absent without
    a default or not a number (``setup()`` then raises the proper error at build time)."""
    value = node.params.get(key, default)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def sigmoid(xp, x):
    """1 / (1 + exp(-x)) without overflow: both branches use exp(-|x|) <= 1."""
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softplus(xp, x):
    """log(1 + exp(x)) without overflow."""
    return xp.maximum(x, 0.0) + xp.log1p(xp.exp(-xp.abs(x)))


SIGMOID_EXPR = "sigmoid(@0)"
# log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), over @0.
SOFTPLUS_EXPR = "add(maximum(@0,0.0),log1p(exp(neg(abs(@0)))))"


class Activation(Op):
    """One input, one output of the same shape."""

    def setup(self):
        self.require_inputs(1)
        self.read_params()

    def read_params(self) -> None:
        """Read and validate this activation's params (none by default)."""


# -- piecewise linear -----------------------------------------------------------------


class ReLU(Activation):
    types = ("nn.ReLU", "F.relu", "torch.relu")

    def forward(self, x):
        return self.xp.maximum(x, 0)  # an int 0 keeps int tensors int, as torch.relu does

    @classmethod
    def elementwise_expression(cls, node):
        return "relu(@0)"


class ReLU6(Activation):
    types = ("nn.ReLU6", "F.relu6")

    def forward(self, x):
        return self.xp.minimum(self.xp.maximum(x, 0), 6)

    @classmethod
    def elementwise_expression(cls, node):
        return "clamp(@0,0,6)"


class LeakyReLU(Activation):
    """x if x > 0 else negative_slope * x.  pnnx also writes PReLU with one weight this way."""

    types = ("nn.LeakyReLU", "F.leaky_relu")

    def read_params(self):
        self.slope = self.float_param("negative_slope", default=0.01)

    def forward(self, x):
        return self.xp.where(x > 0, x, x * self.slope)

    @classmethod
    def elementwise_expression(cls, node):
        slope = node_number(node, "negative_slope", 0.01)
        return None if slope is None else f"where(gt(@0,0.0),@0,mul(@0,{literal(slope)}))"


class PReLU(Op):
    """Leaky ReLU with a learned slope per channel (dim 1), or one slope for all.

    nn.PReLU keeps its slopes in ``@weight``; F.prelu may take them as a second input.
    """

    types = ("nn.PReLU", "F.prelu")

    def setup(self):
        if "weight" in self.node.attrs:
            self.require_inputs(1)
            weight = self.node.attrs["weight"]
            if weight.ndim > 1:
                raise self.error(f"'@weight' must be 1-D (num_parameters,), found shape {tuple(weight.shape)}")
            self.slopes = self.weight("weight")
            self.slopes = self.xp.reshape(self.slopes, (-1,))
        else:
            self.require_inputs(2)
            self.slopes = None  # the second input

    def forward(self, x, slopes=None):
        xp = self.xp
        slopes = self.slopes if slopes is None else xp.reshape(xp.asarray(slopes), (-1,))
        count = slopes.shape[0]
        if count == 1:
            slopes = xp.reshape(slopes, ())
        else:
            channels = x.shape[1] if x.ndim >= 2 else 1
            if channels != count:
                raise ShapeError(
                    f"{self.node.describe()}: {count} slopes need {count} channels on dim 1, "
                    f"found input shape {tuple(x.shape)}"
                )
            slopes = xp.reshape(slopes, (count,) + (1,) * (x.ndim - 2))
        return xp.where(x > 0, x, x * slopes)

    @classmethod
    def elementwise_expression(cls, node):
        weight = node.attrs.get("weight")
        if len(node.inputs) != 1 or weight is None or weight.size != 1:
            return None  # per-channel slopes are not a function of one element
        slope = float(weight.reshape(-1)[0])
        return f"where(gt(@0,0.0),@0,mul(@0,{literal(slope)}))"


class Hardtanh(Activation):
    types = ("nn.Hardtanh", "F.hardtanh")

    def read_params(self):
        self.low = self.float_param("min_val", default=-1.0)
        self.high = self.float_param("max_val", default=1.0)

    def forward(self, x):
        return self.xp.minimum(self.xp.maximum(x, self.low), self.high)

    @classmethod
    def elementwise_expression(cls, node):
        low, high = node_number(node, "min_val", -1.0), node_number(node, "max_val", 1.0)
        if low is None or high is None:
            return None
        return f"minimum(maximum(@0,{literal(low)}),{literal(high)})"


class Clamp(Op):
    """torch.clamp: min and max are each a number, None (no bound), or a tensor input ``$min``/``$max``.

    pnnx leaves ``x.clamp_min(v)`` / ``x.clamp_max(v)`` as ``aten::clamp_min`` /
    ``aten::clamp_max`` with two unnamed inputs: x and the bound (often a constant
    pnnx.Expression such as ``expr=0.1``, so a number or a tensor).
    """

    types = ("torch.clamp", "aten::clamp_min", "aten::clamp_max")

    def setup(self):
        self.input_at = self.input_index("input", default=0)
        if self.node.type.startswith("aten::"):
            self.require_inputs(2)
            bound_at = 1 - self.input_at
            is_min = self.node.type == "aten::clamp_min"
            self.min_index, self.max_index = (bound_at, None) if is_min else (None, bound_at)
            self.low = self.high = None
            return
        self.require_inputs(1, 3)
        self.min_index = self.input_index("min")
        self.max_index = self.input_index("max")
        self.low = None if self.min_index is not None else self._bound("min")
        self.high = None if self.max_index is not None else self._bound("max")
        if self.low is None and self.high is None and self.min_index is None and self.max_index is None:
            raise self.error("torch.clamp needs at least one of 'min' and 'max'")

    def _bound(self, key):
        return None if self.param(key, None) is None else self.float_param(key)

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.input_at]
        low = inputs[self.min_index] if self.min_index is not None else self.low
        high = inputs[self.max_index] if self.max_index is not None else self.high
        if low is not None:
            x = xp.maximum(x, low)
        if high is not None:
            x = xp.minimum(x, high)
        return x

    @classmethod
    def elementwise_expression(cls, node):
        keys = node.input_keys
        if node.type.startswith("aten::"):
            if len(node.inputs) != 2:
                return None
            x = keys.index("input") if "input" in keys else 0
            function = "maximum" if node.type == "aten::clamp_min" else "minimum"
            return f"{function}(@{x},@{1 - x})"
        if "input" not in keys and len(node.inputs) != 1:
            return None
        text = f"@{keys.index('input') if 'input' in keys else 0}"
        for key, function in (("min", "maximum"), ("max", "minimum")):
            if key in keys:
                bound = f"@{keys.index(key)}"  # a tensor bound
            elif node.params.get(key) is not None:
                value = node_number(node, key)
                if value is None:
                    return None
                bound = literal(value)
            else:
                continue
            text = f"{function}({text},{bound})"
        return None if text.startswith("@") else text


class Threshold(Activation):
    """x if x > threshold else value."""

    types = ("nn.Threshold", "F.threshold")

    def read_params(self):
        self.threshold = self.float_param("threshold")
        self.value = self.float_param("value")

    def forward(self, x):
        return self.xp.where(x > self.threshold, x, self.xp.asarray(self.value, dtype=x.dtype))

    @classmethod
    def elementwise_expression(cls, node):
        threshold, value = node_number(node, "threshold"), node_number(node, "value")
        if threshold is None or value is None:
            return None
        return f"where(gt(@0,{literal(threshold)}),@0,{literal(value)})"


class Hardshrink(Activation):
    """x if |x| > lambd else 0."""

    types = ("nn.Hardshrink", "F.hardshrink")

    def read_params(self):
        self.lambd = self.float_param("lambd", default=0.5)

    def forward(self, x):
        return self.xp.where(self.xp.abs(x) > self.lambd, x, self.xp.zeros_like(x))

    @classmethod
    def elementwise_expression(cls, node):
        lambd = node_number(node, "lambd", 0.5)
        return None if lambd is None else f"where(gt(abs(@0),{literal(lambd)}),@0,0.0)"


class Softshrink(Activation):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""

    types = ("nn.Softshrink", "F.softshrink")

    def read_params(self):
        self.lambd = self.float_param("lambd", default=0.5)
        if self.lambd < 0:
            raise self.unsupported("lambd", self.lambd, "a number >= 0")

    def forward(self, x):
        # x minus x clamped to [-lambd, lambd] is exactly the three-piece formula.
        return x - self.xp.minimum(self.xp.maximum(x, -self.lambd), self.lambd)

    @classmethod
    def elementwise_expression(cls, node):
        lambd = node_number(node, "lambd", 0.5)
        if lambd is None or lambd < 0:
            return None
        return f"sub(@0,minimum(maximum(@0,{literal(-lambd)}),{literal(lambd)}))"


# -- smooth -----------------------------------------------------------------------------


class Sigmoid(Activation):
    types = ("nn.Sigmoid", "F.sigmoid", "torch.sigmoid")

    def forward(self, x):
        return sigmoid(self.xp, x)

    @classmethod
    def elementwise_expression(cls, node):
        return "sigmoid(@0)"


class Tanh(Activation):
    types = ("nn.Tanh", "F.tanh", "torch.tanh")

    def forward(self, x):
        return self.xp.tanh(x)

    @classmethod
    def elementwise_expression(cls, node):
        return "tanh(@0)"


class LogSigmoid(Activation):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))."""

    types = ("nn.LogSigmoid", "F.logsigmoid")

    def forward(self, x):
        xp = self.xp
        return xp.minimum(x, 0.0) - xp.log1p(xp.exp(-xp.abs(x)))

    @classmethod
    def elementwise_expression(cls, node):
        return "sub(minimum(@0,0.0),log1p(exp(neg(abs(@0)))))"


class Softsign(Activation):
    types = ("nn.Softsign", "F.softsign")

    def forward(self, x):
        return x / (1.0 + self.xp.abs(x))

    @classmethod
    def elementwise_expression(cls, node):
        return "div(@0,add(abs(@0),1.0))"


class Tanhshrink(Activation):
    types = ("nn.Tanhshrink", "F.tanhshrink")

    def forward(self, x):
        return x - self.xp.tanh(x)

    @classmethod
    def elementwise_expression(cls, node):
        return "sub(@0,tanh(@0))"


class ELU(Activation):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    types = ("nn.ELU", "F.elu")

    def read_params(self):
        self.alpha = self.float_param("alpha", default=1.0)

    def forward(self, x):
        xp = self.xp
        # min(x, 0) keeps exp() from overflowing in the branch where() discards.
        return xp.where(x > 0, x, self.alpha * xp.expm1(xp.minimum(x, 0.0)))

    @classmethod
    def elementwise_expression(cls, node):
        alpha = node_number(node, "alpha", 1.0)
        if alpha is None:
            return None
        return f"where(gt(@0,0.0),@0,mul(sub(exp(minimum(@0,0.0)),1.0),{literal(alpha)}))"


class SELU(Activation):
    """scale * (x if x > 0 else alpha * (exp(x) - 1)) with PyTorch's fixed constants."""

    types = ("nn.SELU", "F.selu", "torch.selu")

    def forward(self, x):
        xp = self.xp
        return SELU_SCALE * xp.where(x > 0, x, SELU_ALPHA * xp.expm1(xp.minimum(x, 0.0)))

    @classmethod
    def elementwise_expression(cls, node):
        return (
            f"mul(where(gt(@0,0.0),@0,mul(sub(exp(minimum(@0,0.0)),1.0),{literal(SELU_ALPHA)})),"
            f"{literal(SELU_SCALE)})"
        )


class CELU(Activation):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    types = ("nn.CELU", "F.celu", "torch.celu")

    def read_params(self):
        self.alpha = self.float_param("alpha", default=1.0)
        if self.alpha == 0:
            raise self.unsupported("alpha", self.alpha, "any nonzero number (PyTorch rejects 0)")

    def forward(self, x):
        xp = self.xp
        negative = self.alpha * xp.expm1(xp.minimum(x, 0.0) / self.alpha)
        return xp.maximum(x, 0.0) + xp.minimum(negative, 0.0)

    @classmethod
    def elementwise_expression(cls, node):
        alpha = node_number(node, "alpha", 1.0)
        if alpha is None or alpha == 0:
            return None
        a = literal(alpha)
        return f"add(maximum(@0,0.0),minimum(mul(sub(exp(div(minimum(@0,0.0),{a})),1.0),{a}),0.0))"


class GELU(Activation):
    """approximate='none': x * Phi(x) with erf; approximate='tanh': the tanh formula."""

    types = ("nn.GELU", "F.gelu")

    def read_params(self):
        self.approximate = self.choice_param("approximate", ("none", "tanh"), default="none")

    def forward(self, x):
        xp = self.xp
        if self.approximate == "tanh":
            inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
            return 0.5 * x * (1.0 + xp.tanh(inner))
        return 0.5 * x * (1.0 + self.backend.erf(x * INV_SQRT_2))

    @classmethod
    def elementwise_expression(cls, node):
        approximate = node.params.get("approximate", "none")
        return {"none": "gelu(@0)", "tanh": "gelu_tanh(@0)"}.get(approximate)


class SiLU(Activation):
    """x * sigmoid(x) (also called swish)."""

    types = ("nn.SiLU", "F.silu")

    def forward(self, x):
        return x * sigmoid(self.xp, x)

    @classmethod
    def elementwise_expression(cls, node):
        return "silu(@0)"


class Mish(Activation):
    """x * tanh(softplus(x))."""

    types = ("nn.Mish", "F.mish")

    def forward(self, x):
        return x * self.xp.tanh(softplus(self.xp, x))

    @classmethod
    def elementwise_expression(cls, node):
        return "mish(@0)"


class Hardsigmoid(Activation):
    """relu6(x + 3) / 6."""

    types = ("nn.Hardsigmoid", "F.hardsigmoid")

    def forward(self, x):
        return self.xp.minimum(self.xp.maximum(x + 3.0, 0.0), 6.0) / 6.0

    @classmethod
    def elementwise_expression(cls, node):
        return "hardsigmoid(@0)"


class Hardswish(Activation):
    """x * relu6(x + 3) / 6."""

    types = ("nn.Hardswish", "F.hardswish")

    def forward(self, x):
        return x * self.xp.minimum(self.xp.maximum(x + 3.0, 0.0), 6.0) / 6.0

    @classmethod
    def elementwise_expression(cls, node):
        return "hardswish(@0)"


class Softplus(Activation):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""

    types = ("nn.Softplus", "F.softplus")

    def read_params(self):
        self.beta = self.float_param("beta", default=1.0)
        self.threshold = self.float_param("threshold", default=20.0)
        if self.beta == 0:
            raise self.unsupported("beta", self.beta, "any nonzero number")

    def forward(self, x):
        scaled = x * self.beta
        return self.xp.where(scaled > self.threshold, x, softplus(self.xp, scaled) / self.beta)

    @classmethod
    def elementwise_expression(cls, node):
        beta, threshold = node_number(node, "beta", 1.0), node_number(node, "threshold", 20.0)
        if beta is None or threshold is None or beta == 0:
            return None
        scaled = f"mul(@0,{literal(beta)})"
        smooth = f"div(add(maximum({scaled},0.0),log1p(exp(neg(abs({scaled}))))),{literal(beta)})"
        return f"where(gt({scaled},{literal(threshold)}),@0,{smooth})"


# -- along a dim ----------------------------------------------------------------------------


def softmax_in_place(xp, x, axis: int):
    """softmax along ``axis``, written over ``x`` (a fresh float array the caller owns).

    Subtracting the max keeps exp from overflowing; working in place keeps attention
    scores (N, heads, L, S) from being copied three times.
    """
    x -= xp.max(x, axis=axis, keepdims=True)
    xp.exp(x, out=x)
    x /= xp.sum(x, axis=axis, keepdims=True)
    return x


def implicit_softmax_dim(rank: int) -> int:
    """PyTorch's legacy choice when softmax gets dim=None (torch.nn.functional._get_softmax_dim)."""
    return 0 if rank in (0, 1, 3) else 1


class Softmax(Activation):
    """softmax / log_softmax / softmin along ``dim`` (PyTorch meaning, negative counts from the end).

    nn.Softmax2d is softmax over the channel dim (-3).
    """

    types = (
        "nn.Softmax", "F.softmax", "torch.softmax",
        "nn.LogSoftmax", "F.log_softmax", "torch.log_softmax",
        "nn.Softmin", "F.softmin",
        "nn.Softmax2d",
    )

    def read_params(self):
        kind = self.node.type.split(".")[-1].lower()
        self.log = kind in ("logsoftmax", "log_softmax")
        self.negate = kind == "softmin"
        if self.node.type == "nn.Softmax2d":
            self.dim = -3
        else:
            self.dim = self.optional_int_param("dim")
        if "dtype" in self.node.params and self.node.params["dtype"] is not None:
            raise self.unsupported("dtype", self.node.params["dtype"], [None])

    def forward(self, x):
        xp = self.xp
        if self.node.type == "nn.Softmax2d" and x.ndim not in (3, 4):
            raise ShapeError(f"{self.node.describe()}: Softmax2d needs a 3-D or 4-D input, found {tuple(x.shape)}")
        if x.ndim == 0:
            return xp.zeros_like(x) if self.log else xp.ones_like(x)
        dim = implicit_softmax_dim(x.ndim) if self.dim is None else self.dim
        axis = normalize_axis(dim, x.ndim, self)
        if self.negate:
            x = -x
        shifted = x - xp.max(x, axis=axis, keepdims=True)
        if self.log:
            return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
        return softmax_in_place(xp, shifted, axis)


OPS = [
    ReLU, ReLU6, LeakyReLU, PReLU, Hardtanh, Clamp, Threshold, Hardshrink, Softshrink,
    Sigmoid, Tanh, LogSigmoid, Softsign, Tanhshrink, ELU, SELU, CELU, GELU, SiLU, Mish,
    Hardsigmoid, Hardswish, Softplus, Softmax,
]
