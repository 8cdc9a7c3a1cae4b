"""What the two chain providers share (dense_chain.py, conv_chain.py): a layer's epilogue as the codes
their kernels run, and finding the runs of layers that each read only the one before.

A layer (a Linear or a convolution with a constant weight) may carry the elementwise math that
read its output as an epilogue (kuiper/ops/epilogue.py).  ``conv_post_ops`` reads that math as
oneDNN post-ops; the chain kernels run the ones listed in ``ACTIVATIONS`` themselves, before and
after a residual sum, with oneDNN's alpha and beta.  A NaN stays NaN through each, as in PyTorch.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..graph.providers import Provider
from . import conv_post_ops

# Multiply-adds of one layer in one call up to which a chain runs compiled.  Its loops take 3-10x longer
# per multiply-add than oneDNN's or BLAS's, so it wins only where a layer's call overhead (8-16 us) is
# the larger part.  Measured in one process, two layers + ReLU, chain / op by op at 1 thread
# (tools/measure_chain_thresholds.py): Linear 20 rows x 64 (82 K) 0.86, 10 x 128 (164 K) 1.03, 20 x 128
# (328 K) 1.51; Conv2d 3x3 4 ch 28x28 (121 K over the padded width) 0.57, 8 ch 16x16 (166 K) 0.70,
# 16 ch 8x8 (184 K) 0.99.
LAYER_CALL_WORK = 1 << 17
# Layers a run needs to be claimed: the gain is the Python between layers.  A single layer keeps its
# op, whose path already chooses its kernel by size (oneDNN, BLAS, the compiled loops).
MIN_LAYERS = 2
# Activation codes by the oneDNN post-op name conv_post_ops reads from an epilogue; 0 is none.
ACTIVATIONS = {"eltwise_relu": 1, "eltwise_clip": 2, "eltwise_logistic": 3, "eltwise_swish": 4,
               "eltwise_hardswish": 5, "eltwise_gelu_erf": 6}
NONE = (0, 0.0, 0.0)
# The kernels' residual argument when the last layer adds none.
NO_RESIDUAL = np.zeros((1, 1), np.float32)


def _code(steps: tuple) -> tuple[int, float, float] | None:
    """(code, alpha, beta) of () or one post-op step; None for anything the kernels have not."""
    if not steps:
        return NONE
    if len(steps) > 1 or steps[0][0] not in ACTIVATIONS:
        return None
    algorithm, alpha, beta = steps[0]
    return ACTIVATIONS[algorithm], float(alpha), float(beta)


def layer_math(op) -> tuple | None:
    """(activation, residual?, activation after the sum) of a layer's epilogue, each activation a
    (code, alpha, beta); None when the kernels cannot run it."""
    epilogue = getattr(op, "epilogue", None)
    if epilogue is None:
        return NONE, False, NONE
    if getattr(op, "epilogue_halves", False) or epilogue.arity > 2:
        return None
    steps = conv_post_ops.post_ops_for(epilogue, op.epilogue_operand)
    if steps is None:
        return None
    if epilogue.arity == 1:
        code = _code(steps)
        return None if code is None else (code, False, NONE)
    at = steps.index(conv_post_ops.SUM)
    before, after = _code(steps[:at]), _code(steps[at + 1:])
    return None if before is None or after is None else (before, True, after)


def takes_epilogue_inputs(unit) -> bool:
    """Whether the step's inputs are its data and, with a residual epilogue, the residual: nothing else."""
    found = layer_math(unit.op)
    return found is not None and len(unit.node.inputs) == (2 if found[1] else 1)


def chain_runs(units, context, joins: Callable) -> list[tuple[int, int]]:
    """The runs of at least MIN_LAYERS consecutive steps that ``joins``, each reading only the output of the
    one before it, which nothing else reads (a layer with a residual sum ends its run)."""
    runs, start = [], None
    for index, unit in enumerate(units):
        joined = joins(unit)
        if (joined and start is not None and not layer_math(units[index - 1].op)[1]
                and unit.node.inputs[0] == units[index - 1].node.outputs[0]
                and context.uses.get(unit.node.inputs[0], 0) == 1):
            continue
        if start is not None:
            runs.append((start, index))
        start = index if joined else None
    if start is not None:
        runs.append((start, len(units)))
    return [(begin, end) for begin, end in runs if end - begin >= MIN_LAYERS]


class ChainProvider(Provider):
    """A provider of runs of layers (``chain_runs``): a subclass says which steps join (``joins``), whether a
    run fits at the sizes the file declares (``fits_declared``: a claim whose calls would all run op by op
    only adds the fallback's cost, and hides its members from the passes after the claims) and which
    Partition class runs a claimed run (``partition``)."""

    partition: type

    def joins(self, unit) -> bool:
        raise NotImplementedError

    def fits_declared(self, members, context) -> bool:
        return True

    def claim(self, units, context):
        return [(begin, end) for begin, end in chain_runs(units, context, self.joins)
                if self.fits_declared(units[begin:end], context)]

    def compile(self, members, inputs, outputs, target, node):
        return self.partition(node, target.backend, members)


def takes(value) -> bool:
    """Whether a value is one the chain kernels read: a float32 NumPy array."""
    return isinstance(value, np.ndarray) and value.dtype == np.float32
