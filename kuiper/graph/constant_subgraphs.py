"""Values computed exactly from constants alone are computed once, at build time.

JAX writes a causal mask (``nn.make_causal_mask``) and other index arithmetic as ops on iotas:
``iota -> reshape -> broadcast -> compare -> convert -> compare -> broadcast``, eight steps a
block in a GPT, recomputing the same (1, heads, T, T) mask at every call (about 55 us of a 3.4 ms
two-block GPT, and a step's host cost for each of the eight).  An op whose inputs are all such
values, or constants, is run here once on the host, by its own op class, and what the rest of the
graph reads becomes a Constant.

Only ops whose results are exact, the same bits whichever library computes them: data movement
(``MOVING_TYPES``), and elementwise ops that compare, convert (correctly rounded) or select, or that
read and make only integers and booleans; transcendental math and float arithmetic stay for the
run-time kernels.  Values of at most ``MAX_FOLDED_BYTES`` (a folded broadcast may be larger than what
it reads: it is then stored).  Runs before the constant folding that reads Constant ops
(constant_fold.py).  Reads only the op set.
"""

from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..errors import KuiperError
from ..ir import dtypes
from ..model_ir import OpNode
from ..plugins import op_registry

CONSTANT = "Constant"
MOVING_TYPES = ("Iota", "Reshape", "Broadcast", "Transpose")
ELEMENTWISE = "Elementwise"
EXACT_FUNCTIONS = ("compare", "convert", "select")
MAX_FOLDED_BYTES = 1 << 20


def fold_constant_subgraphs(order: list[OpNode], model_outputs: list[str]) -> list[OpNode]:
    """The op order with each integer or boolean value computed from constants alone a Constant."""
    kept = set(model_outputs)
    values: dict[str, np.ndarray] = {}  # operand -> its value, for the ops folded and the Constants
    folded: set[str] = set()  # names of the ops computed here
    host = get_backend("numpy")
    registry = op_registry()
    for node in order:
        if node.type == CONSTANT and not node.inputs and len(node.outputs) == 1 and len(node.attrs) == 1:
            values[node.outputs[0]] = next(iter(node.attrs.values()))
            continue
        if (not _exact(node) or len(node.outputs) != 1 or node.outputs[0] in kept
                or not all(operand in values for operand in node.inputs)):
            continue  # (a model output stays the op's: the caller gets what it makes)
        try:
            value = np.asarray(registry[node.type].obj(node, host).forward(*(values[o] for o in node.inputs)))
        except (KuiperError, ValueError, TypeError):
            continue  # bad params or shapes: the op reports them when it is built and run
        if value.nbytes > MAX_FOLDED_BYTES or value.ndim == 0:
            continue  # (single values: constant_fold.py inlines them into the math that reads them)
        values[node.outputs[0]] = value
        folded.add(node.name)
    # Only integer and boolean values become Constants: a float one (a mask converted on its way to a
    # compare) stays inside the fold, or its op runs as before (a weight's transpose keeps the layout the
    # product it feeds reads, and so its sums).
    by_name = {node.name: node for node in order}
    while True:
        read_outside = {operand for node in order if node.name not in folded for operand in node.inputs}
        floats = {name for name in folded if by_name[name].outputs[0] in read_outside
                  and not _exact_dtype(values[by_name[name].outputs[0]].dtype)}
        if not floats:
            break
        folded -= floats
    if not folded:
        return order
    new_order = []
    for node in order:
        if node.name not in folded:
            new_order.append(node)
        elif node.outputs[0] in read_outside:
            new_order.append(OpNode(type=CONSTANT, name=node.name, inputs=[], outputs=list(node.outputs),
                                    attrs={"data": np.ascontiguousarray(values[node.outputs[0]])}, source=node.source))
    return new_order


def _exact(node: OpNode) -> bool:
    """Whether ``node`` computes exactly: moves data, or an elementwise compare, convert, select, or integer and
    boolean math."""
    if node.type in MOVING_TYPES:
        return True
    if node.type != ELEMENTWISE:
        return False
    params = node.params
    if params.get("function") in EXACT_FUNCTIONS:
        return True
    named = [*params.get("operand_dtypes", ()), params.get("dtype")]
    try:
        return all(isinstance(name, str) and (dtypes.is_bool(name) or dtypes.is_integer(name)) for name in named)
    except KuiperError:
        return False  # a dtype the value types do not name (uint32 bits): left to the op


def _exact_dtype(dtype: np.dtype) -> bool:
    """Whether values of ``dtype`` are integers or booleans."""
    return dtype == np.bool_ or np.issubdtype(dtype, np.integer)
