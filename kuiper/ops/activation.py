"""Activations: functions of one tensor, mostly elementwise (softmax works along a dim).

Each elementwise activation gives its math once, as IR built from
``kuiper.ir.composites`` (where every formula is written, overflow-safe and as
PyTorch computes it).  The op runs that math compiled, and the graph's fusion
pass composes it with its neighbours, so fused and unfused runs compute the
same IR.  Param values are read, and checked, when the math is made.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ir import composites, make
from .base import REQUIRED, NodeParams, Op, normalize_axis
from .elementwise import ElementwiseMath, ElementwiseOp


def unary(function) -> ElementwiseMath:
    """The math of a one-input activation."""
    return ElementwiseMath(function, 1)


def _nonzero(key: str):
    def check(params, value):
        if value == 0:
            raise params.unsupported(key, value, "any nonzero number (PyTorch rejects 0)")

    return check


def _not_negative(key: str):
    def check(params, value):
        if value < 0:
            raise params.unsupported(key, value, "a number >= 0")

    return check


def _activation(name: str, function, doc: str, params=(), checks=()) -> type[ElementwiseOp]:
    """The activation op type ``name``, whose math is ``function(x, *param values)``.

    ``params`` are (name, default) pairs of float params (``REQUIRED`` for none);
    ``checks`` are (name, check) pairs run on a value after it is read.
    """

    def elementwise(cls, node):
        reader = NodeParams(node)
        values = {key: reader.float_param(key, default=default) for key, default in params}
        for key, check in checks:
            check(reader, values[key])
        if not values:
            return unary(function)  # one function for every op of the type: its IR is made once (function_for)
        return unary(lambda x: function(x, *values.values()))

    return type(name, (ElementwiseOp,), {
        "types": (name,), "__doc__": doc, "__module__": __name__, "elementwise": classmethod(elementwise),
    })


# -- piecewise linear -----------------------------------------------------------------

ReLU = _activation("ReLU", composites.relu,
                   "max(x, 0); keeps integer tensors integer.")
ReLU6 = _activation("ReLU6", lambda x: composites.clamp(x, 0, 6), "min(max(x, 0), 6).")
LeakyReLU = _activation("LeakyReLU", composites.leaky_relu,
                        "x if x > 0 else negative_slope * x.", params=[("negative_slope", 0.01)])
Hardtanh = _activation("Hardtanh", composites.clamp, "min(max(x, min_val), max_val).",
                       params=[("min_val", -1.0), ("max_val", 1.0)])
Threshold = _activation("Threshold", composites.threshold,
                        "value where x <= threshold, else x.", params=[("threshold", REQUIRED), ("value", REQUIRED)])
Hardshrink = _activation("Hardshrink", composites.hardshrink,
                         "0 where |x| <= lambd, else x.", params=[("lambd", 0.5)])
Softshrink = _activation("Softshrink", composites.softshrink,
                         "x - lambd above lambd, x + lambd below -lambd, 0 between.", params=[("lambd", 0.5)],
                         checks=[("lambd", _not_negative("lambd"))])


class PReLU(Op):
    """Leaky ReLU with a learned slope per channel (dim 1), or one slope for all.

    nn.PReLU keeps its slopes in ``@weight``; F.prelu may take them as a second input.
    """

    types = ("PReLU",)

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
    def elementwise(cls, node):
        weight = node.attrs.get("weight")
        if len(node.inputs) != 1 or weight is None or weight.size != 1:
            return None  # per-channel slopes are not a function of one element
        slope = float(weight.reshape(-1)[0])
        return unary(lambda x: composites.leaky_relu(x, slope))


class Clamp(ElementwiseOp):
    """torch.clamp: min and max are each a number, None (no bound), or a tensor input ``$min``/``$max``.

    A bound given as an input may be a number or a tensor (PNNX's ``aten::clamp_min``
    arrives this way: its frontend binds the second input to ``$min``).
    """

    types = ("Clamp",)

    @classmethod
    def elementwise(cls, node):
        params = NodeParams(node)
        keys = node.input_keys
        x_at = keys.index("input") if "input" in keys else 0
        bounds = {}
        for key in ("min", "max"):
            if key in keys:
                bounds[key] = ("input", keys.index(key))
            elif params.param(key, None) is not None:
                bounds[key] = ("number", params.float_param(key))
        if not bounds:
            raise params.error("needs at least one of 'min' and 'max'")
        params.require_inputs(1 + sum(kind == "input" for kind, _ in bounds.values()))

        def build(*v):
            values = {k: (v[ref] if kind == "input" else ref) for k, (kind, ref) in bounds.items()}
            return composites.clamp(v[x_at], values.get("min"), values.get("max"))

        return ElementwiseMath(build, len(node.inputs))


# -- smooth -----------------------------------------------------------------------------

Sigmoid = _activation("Sigmoid", composites.sigmoid, "1 / (1 + exp(-x)).")
Tanh = _activation("Tanh", lambda x: make.call("tanh", x), "tanh(x).")
LogSigmoid = _activation("LogSigmoid", composites.log_sigmoid,
                         "min(x, 0) - log1p(exp(-|x|)).")
Softsign = _activation("Softsign", composites.softsign, "x / (1 + |x|).")
Tanhshrink = _activation("Tanhshrink", composites.tanhshrink, "x - tanh(x).")
ELU = _activation("ELU", composites.elu, "x if x > 0 else alpha * expm1(x).",
                  params=[("alpha", 1.0)])
SELU = _activation("SELU", composites.selu,
                   "ELU with PyTorch's fixed alpha and scale.")
CELU = _activation("CELU", composites.celu,
                   "max(0, x) + min(0, alpha * expm1(x / alpha)).", params=[("alpha", 1.0)],
                   checks=[("alpha", _nonzero("alpha"))])
SiLU = _activation("SiLU", composites.silu, "x * sigmoid(x) (also called swish).")
Mish = _activation("Mish", composites.mish, "x * tanh(softplus(x)).")
Hardsigmoid = _activation("Hardsigmoid", composites.hardsigmoid,
                          "relu6(x + 3) / 6.")
Hardswish = _activation("Hardswish", composites.hardswish, "x * relu6(x + 3) / 6.")
Softplus = _activation("Softplus", composites.softplus,
                       "log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold.",
                       params=[("beta", 1.0), ("threshold", 20.0)], checks=[("beta", _nonzero("beta"))])


class GELU(ElementwiseOp):
    """approximate='none': x * Phi(x) with erf; approximate='tanh': the tanh formula."""

    types = ("GELU",)

    @classmethod
    def elementwise(cls, node):
        approximate = NodeParams(node).choice_param("approximate", ("none", "tanh"), default="none")
        return unary(composites.gelu_tanh if approximate == "tanh" else composites.gelu)


# -- along a dim ----------------------------------------------------------------------------


def implicit_softmax_dim(rank: int) -> int:
    """PyTorch's legacy choice when softmax gets dim=None (torch.nn.functional._get_softmax_dim)."""
    return 0 if rank in (0, 1, 3) else 1


class Softmax(Op):
    """softmax along ``dim`` (PyTorch meaning, negative counts from the end); ``log=True`` gives
    log_softmax, ``negate=True`` softmin (softmax of -x).  ``input_ranks`` limits the input's rank
    (PNNX's nn.Softmax2d is dim=-3 on 3-D or 4-D inputs)."""

    types = ("Softmax",)
    arity = 1

    def setup(self):
        self.log = self.bool_param("log", default=False)
        self.negate = self.bool_param("negate", default=False)
        self.dim = self.optional_int_param("dim")
        self.input_ranks = self.ints_param("input_ranks") if self.has_param("input_ranks") else None
        if "dtype" in self.node.params and self.node.params["dtype"] is not None:
            raise self.unsupported("dtype", self.node.params["dtype"], [None])

    def forward(self, x):
        xp = self.xp
        if self.input_ranks is not None and x.ndim not in self.input_ranks:
            ranks = " or ".join(f"{rank}-D" for rank in self.input_ranks)
            raise ShapeError(f"{self.node.describe()}: needs a {ranks} input, found {tuple(x.shape)}")
        if x.ndim == 0:
            return xp.zeros_like(x) if self.log else xp.ones_like(x)
        dim = implicit_softmax_dim(x.ndim) if self.dim is None else self.dim
        axis = normalize_axis(dim, x.ndim, self)
        # A C-ordered copy for softmax_in_place to write over: a copy that kept a permuted input's
        # strides (CaiT's talking-heads scores, heads innermost) missed the compiled row kernel
        # and took NumPy's reductions over strided rows, 10x slower.
        fresh = self.empty(x.shape, x.dtype)
        fresh[...] = -x if self.negate else x
        if self.log:
            fresh -= xp.max(fresh, axis=axis, keepdims=True)
            return fresh - xp.log(xp.sum(xp.exp(fresh), axis=axis, keepdims=True))
        return self.backend.softmax_in_place(fresh, axis)


OPS = [
    ReLU, ReLU6, LeakyReLU, PReLU, Hardtanh, Clamp, Threshold, Hardshrink, Softshrink,
    Sigmoid, Tanh, LogSigmoid, Softsign, Tanhshrink, ELU, SELU, CELU, GELU, SiLU, Mish,
    Hardsigmoid, Hardswish, Softplus, Softmax,
]
