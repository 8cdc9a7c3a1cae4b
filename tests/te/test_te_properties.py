"""Property: the gradient of a random well-formed kernel matches finite differences (float64)."""

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kuiper.te as te

EXTENTS = {"i": 3, "j": 2, "k": 2}  # Y<3, 2>[i, j]; k is summed
MAX_SHIFT = 2

# A dimension's subscript family: (text with {c} for the per-access shift, extent it needs).
FORMS = [
    ("i + {c}", 3 + MAX_SHIFT),
    ("j + {c}", 2 + MAX_SHIFT),
    ("2 * i + {c}", 5 + MAX_SHIFT),
    ("i + j + {c}", 4 + MAX_SHIFT),
    ("k", 2),  # a summed index stands alone somewhere, so it has a range
    ("(i + {c}) % 2", 2),
    ("(i + j + {c}) // 2", 4),
    ("{c}", 3),
]


@st.composite
def tensors(draw):
    count = draw(st.integers(1, 3))
    return [draw(st.lists(st.sampled_from(FORMS), min_size=1, max_size=2)) for _ in range(count)]


def access(draw, name, dims):
    shape = ", ".join(str(extent) for _, extent in dims)
    subscripts = ", ".join(form.format(c=draw(st.integers(0, MAX_SHIFT))) for form, _ in dims)
    return f"{name}<{shape}>[{subscripts}]"


@st.composite
def kernels(draw):
    declared = draw(tensors())

    def expression(depth):
        if depth == 0 or draw(st.integers(0, 3)) == 0:
            if draw(st.integers(0, 4)) == 0:
                return draw(st.sampled_from(["0.5", "2.0", "1.5"]))
            index = draw(st.integers(0, len(declared) - 1))
            return access(draw, f"T{index}", declared[index])
        kind = draw(st.sampled_from(["+", "-", "*", "/", "tanh", "sin", "exp"]))
        a = expression(depth - 1)
        if kind in ("tanh", "sin"):
            return f"{kind}({a})"
        if kind == "exp":
            return f"exp(0.5 * {a})"
        b = expression(depth - 1)
        if kind == "/":
            return f"({a}) / (({b}) * ({b}) + 1.0)"
        return f"({a}) {kind} ({b})"

    value = expression(3)
    return f"Y<3, 2>[i, j] = {value};"


@settings(
    max_examples=int(os.environ.get("KUIPER_TE_EXAMPLES", 40)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(kernels(), st.integers(0, 2**31 - 1))
def test_grad_of_random_kernel_matches_finite_differences(text, seed):
    forward = te.parse(text, dtype="float64")
    gradient = te.grad(forward, forward.inputs)
    rng = np.random.default_rng(seed)
    inputs = {name: rng.uniform(-1, 1, forward.shapes[name]) for name in forward.inputs}
    dy = rng.uniform(-1, 1, forward.shapes["Y"])
    run = te.compile(forward, "numpy")

    def loss(values):
        return float(np.sum(run(**values)["Y"] * dy))

    feeds = {name: inputs[name] for name in gradient.inputs if name != "dY"}
    grads = te.compile(gradient, "numpy")(dY=dy, **feeds)
    step = 1e-6
    for name in forward.inputs:
        direction = rng.standard_normal(inputs[name].shape)
        numeric = (
            loss({**inputs, name: inputs[name] + step * direction})
            - loss({**inputs, name: inputs[name] - step * direction})
        ) / (2 * step)
        analytic = float(np.sum(grads["d" + name] * direction))
        assert abs(numeric - analytic) <= 1e-5 * max(1.0, abs(analytic)), (text, name, numeric, analytic)
    # the gradient kernel is itself well formed and prints back (a constant kernel's has no statements)
    if gradient.statements:
        assert te.parse(str(gradient), dtype="float64", inputs=gradient.inputs, outputs=gradient.outputs) == gradient
