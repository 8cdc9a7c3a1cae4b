"""HLO control flow: while and conditional, their computations built once as sub-Models."""

from __future__ import annotations

from .ops_base import HloOp


class While(HloOp):
    types = ("hlo.while",)

    def hlo_setup(self):
        self.condition = self.sub_model(self.called("condition"))
        self.body = self.sub_model(self.called("body"))

    def forward(self, *state):
        while bool(self.condition(*state)[0]):
            state = self.body(*state)
        return state[0] if len(state) == 1 else tuple(state)


class Conditional(HloOp):
    """``conditional(pred, t, f)`` with true/false computations, or ``conditional(index, ...)`` with branches.

    An index out of range runs the last branch (XLA's rule).
    """

    types = ("hlo.conditional",)

    def hlo_setup(self):
        attributes = self.instruction.attributes
        if "branch_computations" in attributes:
            names = self.attribute("branch_computations")
            if not isinstance(names, list) or not names:
                raise self.error(f"branch_computations={names!r} must list computations")
            computations = [self.module.computations[name] for name in names]
        else:
            computations = [self.called("true_computation"), self.called("false_computation")]
        self.branches = [self.sub_model(c) for c in computations]
        counts = self.param("operand_leaf_counts")
        if len(counts) != len(self.branches) + 1:
            raise self.error(f"has {len(counts) - 1} branch operand(s) for {len(self.branches)} branch(es)")
        self.spans = []
        start = counts[0]
        for count in counts[1:]:
            self.spans.append((start, start + count))
            start += count
        self.by_predicate = self.operand_shape(0).element_type == "pred"

    def forward(self, selector, *arguments):
        if self.by_predicate:
            branch = 0 if bool(selector) else 1
        else:
            branch = int(selector)
            if not 0 <= branch < len(self.branches):
                branch = len(self.branches) - 1
        start, stop = self.spans[branch]
        result = self.branches[branch](*(((selector,) + arguments)[start:stop]))
        return result[0] if len(result) == 1 else tuple(result)


OPS = [While, Conditional]
