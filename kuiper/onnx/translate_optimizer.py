"""ONNX's optimizer steps (ai.onnx.preview.training Adagrad, Adam, Momentum) -> chains of the canonical
Elementwise op.

Each is one update of tensors X given their gradients G and optimizer state, a formula of tensors
(ONNX's operator specification spells it out): nothing is trained or differentiated here, so inference
computes it like any other arithmetic. The inputs are R (the learning rate), T (the update count), then
N tensors X, N gradients G and N of each state (H for Adagrad; V for Momentum; V and H for Adam); the
outputs are the N new X, then the N new values of each state. Scalars that depend on T are computed
once in float64 and rounded to X's type.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

# op type -> how many state tensors each X has
STATES = {"Adagrad": 1, "Momentum": 1, "Adam": 2}


class _Step:
    """The shared parts of one optimizer node: its groups of inputs, and arithmetic in X's type."""

    def __init__(self, site: Site):
        self.site = site
        self.emit = Emit(site)
        groups = 2 + STATES[site.op_type]  # X, G and the states
        count = len(site.inputs) - 2
        if count <= 0 or count % groups or len(site.outputs) != count // groups * (groups - 1):
            raise site.error(f"takes R, T, then N of X, G and {groups - 2} state(s) each, and gives N of X and "
                             f"each state: found {len(site.inputs)} inputs and {len(site.outputs)} outputs")
        self.n = count // groups

    def tensors(self, group: int) -> list[str]:
        """The N inputs of ``group`` (0: X, 1: G, 2.. the states)."""
        return [self.site.input(2 + group * self.n + i) for i in range(self.n)]

    def outputs(self, group: int) -> list[str]:
        return [self.site.outputs[group * self.n + i] for i in range(self.n)]

    def fn(self, function: str, *args: str, out: str | None = None) -> str:
        return self.emit.fn(function, list(args), out=out)

    def const(self, value: float, dtype: str) -> str:
        return self.emit.const(value, dtype)

    def regularized(self, x: str, g: str, coefficient: float) -> str:
        """G + norm_coefficient * X (the gradient of the L2 regularization added)."""
        dtype = self.emit.dtype(x)
        return self.fn("add", self.fn("multiply", self.const(coefficient, dtype), x), g)


def translate_adagrad(site: Site) -> list[OpNode]:
    """r = R / (1 + T * decay_factor); G' = G + norm_coefficient * X; H_new = H + G'^2;
    X_new = X - r * G' / (sqrt(H_new) + epsilon)."""
    step = _Step(site)
    emit = step.emit
    decay, epsilon = site.float_("decay_factor", 0.0), site.float_("epsilon", 1e-6)
    coefficient = site.float_("norm_coefficient", 0.0)
    t = emit.convert(site.input(1), "float64")
    rate = step.fn("divide", emit.convert(site.input(0), "float64"),
                   step.fn("add", step.const(1.0, "float64"), step.fn("multiply", t, step.const(decay, "float64"))))
    groups = zip(step.tensors(0), step.tensors(1), step.tensors(2), step.outputs(0), step.outputs(1))
    for x, g, h, x_new, h_new in groups:
        dtype = emit.dtype(x)
        g = step.regularized(x, g, coefficient)
        h_next = step.fn("add", h, step.fn("multiply", g, g), out=h_new)
        root = step.fn("add", step.fn("sqrt", h_next), step.const(epsilon, dtype))
        move = step.fn("divide", step.fn("multiply", emit.convert(rate, dtype), g), root)
        step.fn("subtract", x, move, out=x_new)
    return emit.ops


def translate_momentum(site: Site) -> list[OpNode]:
    """G' = G + norm_coefficient * X; V_new = alpha * V + beta' * G' (beta' = beta, or 1 on the first
    update, T = 0); standard: X_new = X - R * V_new; nesterov: X_new = X - R * (G' + alpha * V_new)."""
    step = _Step(site)
    emit = step.emit
    alpha, beta = site.float_("alpha"), site.float_("beta")
    coefficient, mode = site.float_("norm_coefficient"), site.string("mode")
    if mode not in ("standard", "nesterov"):
        raise site.error(f"mode must be 'standard' or 'nesterov', found {mode!r}")
    first = emit.compare("le", emit.convert(site.input(1), "int64"), emit.const(0, "int64"))
    beta_now = step.fn("select", first, step.const(1.0, "float64"), step.const(beta, "float64"))
    groups = zip(step.tensors(0), step.tensors(1), step.tensors(2), step.outputs(0), step.outputs(1))
    for x, g, v, x_new, v_new in groups:
        dtype = emit.dtype(x)
        g = step.regularized(x, g, coefficient)
        v_next = step.fn("add", step.fn("multiply", step.const(alpha, dtype), v),
                         step.fn("multiply", emit.convert(beta_now, dtype), g), out=v_new)
        direction = v_next if mode == "standard" else step.fn(
            "add", g, step.fn("multiply", step.const(alpha, dtype), v_next))
        step.fn("subtract", x, step.fn("multiply", emit.convert(site.input(0), dtype), direction), out=x_new)
    return emit.ops


def translate_adam(site: Site) -> list[OpNode]:
    """G' = G + norm_coefficient * X; V_new = alpha * V + (1 - alpha) * G'; H_new = beta * H + (1 - beta) * G'^2;
    r = R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R;
    X_new = (1 - norm_coefficient_post) * (X - r * V_new / (sqrt(H_new) + epsilon))."""
    step = _Step(site)
    emit = step.emit
    alpha, beta = site.float_("alpha", 0.9), site.float_("beta", 0.999)
    epsilon, coefficient = site.float_("epsilon", 1e-6), site.float_("norm_coefficient", 0.0)
    post = site.float_("norm_coefficient_post", 0.0)
    wide = "float64"
    t = emit.convert(site.input(1), wide)
    rate = emit.convert(site.input(0), wide)
    correction = step.fn("divide", step.fn("sqrt", step.fn("subtract", step.const(1.0, wide),
                                                           step.fn("power", step.const(beta, wide), t))),
                         step.fn("subtract", step.const(1.0, wide), step.fn("power", step.const(alpha, wide), t)))
    later = emit.compare("gt", t, step.const(0.0, wide))
    rate = step.fn("select", later, step.fn("multiply", rate, correction), rate)
    outputs = zip(step.tensors(0), step.tensors(1), step.tensors(2), step.tensors(3),
                  step.outputs(0), step.outputs(1), step.outputs(2))
    for x, g, v, h, x_new, v_new, h_new in outputs:
        dtype = emit.dtype(x)
        g = step.regularized(x, g, coefficient)
        v_next = step.fn("add", step.fn("multiply", step.const(alpha, dtype), v),
                         step.fn("multiply", step.const(1.0 - alpha, dtype), g), out=v_new)
        h_next = step.fn("add", step.fn("multiply", step.const(beta, dtype), h),
                         step.fn("multiply", step.const(1.0 - beta, dtype), step.fn("multiply", g, g)), out=h_new)
        root = step.fn("add", step.fn("sqrt", h_next), step.const(epsilon, dtype))
        moved = step.fn("subtract", x, step.fn("multiply", emit.convert(rate, dtype), step.fn("divide", v_next, root)))
        step.fn("multiply", step.const(1.0 - post, dtype), moved, out=x_new)
    return emit.ops


TRAINING = "ai.onnx.preview.training"
TRANSLATORS = {f"{TRAINING}:Adagrad": translate_adagrad, f"{TRAINING}:Momentum": translate_momentum,
               f"{TRAINING}:Adam": translate_adam}
