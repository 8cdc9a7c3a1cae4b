"""Ops whose work is a sub-graph: Map (applied element by element), While (a loop), If (branches),
Scan (a loop over slices of its inputs, carrying a state: jax.lax.scan, ONNX Scan).

The sub-graphs are params holding a ModelIR; the graph builder builds them on the op's
backend and the op calls them as Models (``self.subgraph(key)``).

A While runs at most the loop budget's iterations, and for at most the loop time budget (shared
with the loops nested in it: kuiper.limits.loop_limits, read once by the outermost loop), and is
refused when built if its condition is a constant true, so no model spins forever; a
Ctrl-C between iterations ends a long one like any Python loop.
"""

from __future__ import annotations

import functools
import operator
from time import monotonic

import numpy as np  # to look at constant params once, at build time; never to compute

from ..errors import ShapeError
from ..ir.dtypes import array_dtype
from ..limits import check_deadline, check_iterations, loop_budget, loop_limits
from ..model_ir import ModelIR
from .base import Op, normalize_axis
from .reducers import call_subgraph


def _single_or_tuple(values):
    return values[0] if len(values) == 1 else tuple(values)


class Map(Op):
    """``function`` (a sub-graph written for scalars) applied to the inputs element by element."""

    types = ("Map",)

    def setup(self):
        self.function = self.subgraph("function")
        if len(self.function.inputs) != len(self.node.inputs):
            raise self.error(f"function takes {len(self.function.inputs)} input(s), the op has {len(self.node.inputs)}")
        self.dtypes = [spec.dtype for spec in self.function.outputs]

    def forward(self, *inputs):
        xp = self.xp
        results = call_subgraph(xp, self.function, inputs)
        return _single_or_tuple([r if d is None else xp.astype(xp.asarray(r), array_dtype(xp, d), copy=False)
                                 for r, d in zip(results, self.dtypes)])


class While(Op):
    """Runs ``body`` on the state (the inputs) while ``condition`` of the state is true."""

    types = ("While",)

    def setup(self):
        self.condition = self.subgraph("condition")
        self.body = self.subgraph("body")
        count = len(self.node.inputs)
        if len(self.node.outputs) != count or len(self.body.inputs) != count or len(self.body.outputs) != count:
            raise self.error(f"the state has {count} value(s); the body must take and return as many "
                             f"(takes {len(self.body.inputs)}, returns {len(self.body.outputs)})")
        if len(self.condition.inputs) != count or len(self.condition.outputs) != 1:
            raise self.error(f"the condition must take the {count} state value(s) and return one")
        if _constant_true(self.param("condition")):
            raise self.error("the condition is the constant true: the loop would never end")
        self.bound = _integer_bound(self.param("condition"))

    def forward(self, *state):
        state = _dense(self.xp, state, self.body.owned_inputs)
        with loop_limits() as (budget, deadline):
            # The state is checked on the way in; after that the body made it, of the types it takes, and
            # each iteration moves only what the body and condition read (Model.loop_step).
            if not bool(self.condition.call_within(state)[0]):
                return _single_or_tuple(state)
            self._check_limits(1, budget, deadline)
            state = self.body.call_within(state)
            condition, body, iterations = self._condition_holds, self._body_step, 1
            while condition(state):
                iterations += 1
                # The two budgets' tests written out: the checks (and the op's description) only to raise.
                if iterations > budget or monotonic() > deadline:
                    self._check_limits(iterations, budget, deadline)
                state = body(state)
        return _single_or_tuple(state)

    def _check_limits(self, iterations: int, budget: int, deadline: float) -> None:
        where = self.node.describe()
        check_iterations(iterations, budget, where)
        check_deadline(deadline, where)

    @functools.cached_property
    def _condition_holds(self):
        """``holds(state) -> bool`` for the iterations after the first (state the body made).  A condition
        that compares one integer of the state with a constant or another (a fori_loop's ``i < n``) is
        that comparison of two Python ints, which are exact: 0.2 us, where running the condition's
        one-step plan on a 0-d array and reading its result cost 1.7 an iteration."""
        if self.bound is not None:
            position, compare, constant, other = self.bound
            if other is not None:
                return lambda state: compare(int(state[position]), int(state[other]))
            return lambda state: compare(int(state[position]), constant)
        step = self.condition.loop_step()
        return lambda state: bool(step(state)[0])

    @functools.cached_property
    def _body_step(self):
        return self.body.loop_step()


def _dense(xp, state, owned=()) -> tuple:
    """The loop's state with each broadcast view (a zero stride: JAX's ``zeros`` initial carry, a
    broadcast constant) copied into an array of its own, once when the loop starts, as XLA gives its
    loop state buffers.  The body's first iteration would otherwise read the view: BLAS takes no zero
    stride, and NumPy's own loop for a Flax LSTM's 1 x 128 by 128 x 512 product took 135 us, BLAS 4.
    The ``owned`` positions (the body's ``owned_inputs``: values its ops overwrite) are copied too: the
    caller's arrays are never written."""
    dense = list(state)
    for index, value in enumerate(state):
        strides = getattr(value, "strides", None)
        if index in owned or (strides and 0 in strides and value.size > 1):
            dense[index] = xp.asarray(value, copy=True)
    return tuple(dense)


_COMPARISONS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
                "ne": operator.ne}
_MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}  # c < x is x > c
_INTEGERS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def _integer_bound(graph) -> tuple | None:
    """(state position, comparison, constant, other state position) when the condition sub-graph is exactly
    one comparison, in the natural order, of a 0-d integer state value with a 0-d integer constant of its
    dtype (other position None; a constant on the left is mirrored to the right) or with another such state
    value (constant None: a loop whose trip count is carried, ``while i < n``); else None."""
    if not isinstance(graph, ModelIR) or len(graph.outputs) != 1 or len(graph.ops) not in (1, 2):
        return None
    compare = graph.ops[-1] if graph.ops[-1].type != "Constant" else graph.ops[0]
    params = compare.params
    if (compare.type != "Elementwise" or compare.outputs != [graph.outputs[0]] or len(compare.inputs) != 2
            or set(params) - {"function", "operand_dtypes", "dtype", "direction", "order"}
            or params.get("function") != "compare" or params.get("direction") not in _COMPARISONS):
        return None
    dtypes = list(params.get("operand_dtypes") or ())
    dtype = dtypes[0] if len(dtypes) == 2 and dtypes[0] == dtypes[1] else None
    natural = {"", "unsigned" if dtype and dtype.startswith("u") else "signed"}
    if dtype not in _INTEGERS or params.get("order", "") not in natural:
        return None
    direction, (left, right) = params["direction"], compare.inputs
    constant = None
    if len(graph.ops) == 2:
        (node,) = [node for node in graph.ops if node is not compare]
        data = node.attrs.get("data")
        if (node.type != "Constant" or node.inputs or len(node.outputs) != 1 or node.params
                or set(node.attrs) != {"data"} or not isinstance(data, np.ndarray) or data.shape != ()
                or str(data.dtype) != dtype or (left == node.outputs[0]) == (right == node.outputs[0])):
            return None
        if left == node.outputs[0]:
            left, right, direction = right, left, _MIRRORED[direction]
        constant = int(data)
    positions = []
    for operand in (left, right) if constant is None else (left,):
        info = graph.operands.get(operand)
        if operand not in graph.inputs or info is None or info.shape != () or info.dtype != dtype:
            return None
        positions.append(graph.inputs.index(operand))
    other = positions[1] if constant is None else None
    return positions[0], _COMPARISONS[direction], constant, other


def _constant_true(graph) -> bool:
    """Whether the sub-graph's one output comes from an op with no inputs whose data is all true."""
    if not isinstance(graph, ModelIR) or len(graph.outputs) != 1:
        return False
    for node in graph.ops:
        if graph.outputs[0] in node.outputs:
            data = node.attrs.get("data")
            return not node.inputs and len(node.attrs) == 1 and data is not None and bool(np.all(data))
    return False


class If(Op):
    """Inputs ``selector, branch operands...``: runs one of ``branches`` on its own operands.

    ``branch_input_counts[i]`` says how many of the inputs after the selector are branch i's
    (they follow each other in branch order).  ``selector="pred"``: a bool, true runs branch 0
    and false branch 1; ``selector="index"``: an integer, out of range runs the last branch.
    """

    types = ("If",)

    def setup(self):
        self.branches = self.subgraph("branches")
        if not isinstance(self.branches, list):
            self.branches = [self.branches]
        self.by_predicate = self.choice_param("selector", ("pred", "index")) == "pred"
        if self.by_predicate and len(self.branches) != 2:
            raise self.error(f"a pred selector picks one of 2 branches, found {len(self.branches)}")
        counts = self.ints_param("branch_input_counts")
        if len(counts) != len(self.branches) or sum(counts) != len(self.node.inputs) - 1:
            raise self.error(f"branch_input_counts={list(counts)} must give each of {len(self.branches)} branch(es) "
                             f"its share of the {len(self.node.inputs) - 1} input(s) after the selector")
        starts = [1 + sum(counts[:i]) for i in range(len(counts))]
        self.spans = [(start, start + count) for start, count in zip(starts, counts)]
        for branch, (start, stop) in zip(self.branches, self.spans):
            if len(branch.inputs) != stop - start or len(branch.outputs) != len(self.node.outputs):
                raise self.error(f"a branch takes {len(branch.inputs)} input(s) and gives {len(branch.outputs)}; "
                                 f"expected {stop - start} and {len(self.node.outputs)}")

    def forward(self, selector, *operands):
        if self.by_predicate:
            branch = 0 if bool(selector) else 1
        else:
            branch = int(selector)
            if not 0 <= branch < len(self.branches):
                branch = len(self.branches) - 1
        start, stop = self.spans[branch]
        model = self.branches[branch]
        return _single_or_tuple(model.call_within(((selector,) + operands)[start:stop]))


class Scan(Op):
    """Inputs ``state..., sequences..., extras...``: for each step t the ``body`` maps (state, the t-th slice of
    every sequence along its axis, extras) to (new state, one slice of each output sequence).

    Params: ``body``, ``state_count``, ``sequence_count``; per sequence ``input_axes`` and ``input_reverse``
    (1: step t reads slice T-1-t); per output sequence ``output_axes`` and ``output_reverse`` (1: the
    slices are stacked last step first). Outputs: the final state, then the stacked output sequences.
    The extras (values the body reads that are not scanned) pass to every step unchanged.
    """

    types = ("Scan",)

    def setup(self):
        self.body = self.subgraph("body")
        self.state_count = self.int_param("state_count")
        self.sequence_count = self.int_param("sequence_count")
        extras = len(self.node.inputs) - self.state_count - self.sequence_count
        if self.state_count < 0 or self.sequence_count < 1 or extras < 0:
            raise self.error(f"state_count={self.state_count} and sequence_count={self.sequence_count} do not "
                             f"fit {len(self.node.inputs)} input(s) (at least one sequence)")
        outputs = len(self.node.outputs) - self.state_count
        self.input_axes = self.ints_param("input_axes", default=(0,) * self.sequence_count)
        self.input_reverse = self.ints_param("input_reverse", default=(0,) * self.sequence_count)
        self.output_axes = self.ints_param("output_axes", default=(0,) * outputs)
        self.output_reverse = self.ints_param("output_reverse", default=(0,) * outputs)
        if len(self.input_axes) != self.sequence_count or len(self.input_reverse) != self.sequence_count \
                or len(self.output_axes) != outputs or len(self.output_reverse) != outputs or outputs < 0:
            raise self.error("needs an axis and a direction for every input and output sequence")
        if len(self.body.inputs) != len(self.node.inputs) or len(self.body.outputs) != len(self.node.outputs):
            raise self.error(f"the body takes {len(self.body.inputs)} and gives {len(self.body.outputs)} value(s); "
                             f"expected {len(self.node.inputs)} and {len(self.node.outputs)}")

    def forward(self, *inputs):
        xp = self.xp
        state = list(inputs[:self.state_count])
        sequences = inputs[self.state_count:self.state_count + self.sequence_count]
        extras = list(inputs[self.state_count + self.sequence_count:])
        axes = [normalize_axis(axis, x.ndim, self) for axis, x in zip(self.input_axes, sequences)]
        lengths = {x.shape[axis] for axis, x in zip(axes, sequences)}
        if len(lengths) != 1:
            raise ShapeError(f"{self.node.describe()}: the sequences differ in length along their axes ({sorted(lengths)})")
        steps = lengths.pop()
        check_iterations(steps, loop_budget(), self.node.describe())
        collected: list[list] = [[] for _ in self.output_axes]
        for step in range(steps):
            slices = [xp.take(x, steps - 1 - step if reverse else step, axis=axis)
                      for x, axis, reverse in zip(sequences, axes, self.input_reverse)]
            results = self.body.call_within([*state, *slices, *extras])
            state = results[:self.state_count]
            for bucket, value in zip(collected, results[self.state_count:]):
                bucket.append(value)
        if steps == 0 and collected:
            raise ShapeError(f"{self.node.describe()}: a scan of 0 steps has no slices to stack")
        stacked = []
        for bucket, axis, reverse in zip(collected, self.output_axes, self.output_reverse):
            slices = bucket[::-1] if reverse else bucket
            stacked.append(xp.stack(slices, axis=normalize_axis(axis, slices[0].ndim + 1, self)))
        return _single_or_tuple([*state, *stacked])


OPS = [Map, While, If, Scan]
