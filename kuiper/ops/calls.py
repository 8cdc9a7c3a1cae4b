"""Ops whose work is a sub-graph: Map (applied element by element), While (a loop), If (branches).

The sub-graphs are params holding a ModelIR; the graph builder builds them on the op's
backend and the op calls them as Models (``self.subgraph(key)``).

A While runs at most the loop budget's iterations (kuiper.limits.loop_budget), and for at most
the loop time budget (kuiper.limits.loop_deadline: shared with the loops nested in it), and is
refused when built if its condition is a constant true, so no model spins forever; a
Ctrl-C between iterations ends a long one like any Python loop.
"""

from __future__ import annotations

import numpy as np  # to look at a constant param once, at build time; never to compute

from ..ir.dtypes import array_dtype
from ..limits import check_deadline, check_iterations, loop_budget, loop_deadline
from ..model_ir import ModelIR
from .base import Op
from .reducers import call_subgraph


def _results(model, value) -> list:
    return list(value) if len(model.outputs) != 1 else [value]


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

    def forward(self, *state):
        budget, iterations = loop_budget(), 0
        with loop_deadline() as deadline:
            while bool(self.condition(*state)):
                iterations += 1
                check_iterations(iterations, budget, self.node.describe())
                check_deadline(deadline, self.node.describe())
                state = _results(self.body, self.body(*state))
        return _single_or_tuple(state)


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
        return _single_or_tuple(_results(model, model(*((selector,) + operands)[start:stop])))


OPS = [Map, While, If]
