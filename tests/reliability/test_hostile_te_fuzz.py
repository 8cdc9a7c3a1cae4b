"""Fuzzing the tensor-expression language: any text may only parse, or raise a KuiperError.

Kernels are drawn from the grammar (statements of accesses, operators, calls, where
clauses, with hostile numbers and names) and from valid kernels mutated token by
token.  What parses is also compiled under a small memory budget, run on ones, and
emitted in every language (the NumPy source must compile).  CI runs a fixed, small set
of examples (derandomized, as tests/reliability/test_fuzz.py); KUIPER_FUZZ_EXAMPLES=100000 runs more.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuiper import te
from kuiper.errors import KuiperError

EXAMPLES = int(os.environ.get("KUIPER_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize="KUIPER_FUZZ_EXAMPLES" not in os.environ,
    database=None,
)
SEEDS = [
    "C<4, 6>[i, j] = A<4, 5>[i, k] * B<5, 6>[k, j];",
    "Y<6>[p] += X<4>[i] where i = p - 1;",
    "Y<4>[i] = X<9>[2 * i + 1] * W<4, 3>[i, r] where 2 * i + r < 7;",
    "O<3>[i] = select(A<3>[i] > 0.0, exp(A<3>[i]), -A<3>[i]) / 2.0;",
    "M<2, 2>[i, j] = max(A<2, 2>[i, j], B<2, 2>[j, i]) + sqrt(abs(A<2, 2>[j, i]));",
    "Z<8>[q] = Q<4>[i] where i = q // 2, q % 2 == 0;",
]
NUMBERS = ["0", "1", "2", "-1", "3.5", "1e308", "1e-320", "99999999999999999999999999999", "4611686018427387905",
           "0.0", ".5", "5."]
SYMBOLS = ["[", "]", "(", ")", ",", ";", "=", "+=", "!", "&&", "||", "<", "<=", ">", ">=", "==", "!=", "+", "-",
           "*", "/", "//", "%", "where", "select", "#", "\n", "<", ">"]
NAMES = ["A", "B", "i", "j", "k", "z0", "int", "np", "return", "exp", "max", "select", "where", "u_A", "v_i",
         "__x", "kernel", "main"]
TOKENS = st.one_of(st.sampled_from(NUMBERS), st.sampled_from(SYMBOLS), st.sampled_from(NAMES),
                   st.text(alphabet="<>[](),;=+-*/%!&|#.0123456789eAij \n\t'\"\\", max_size=3))


VALID_READS = ["A<3, 3>[i, j]", "A<3, 3>[j, i]", "B<3>[i]", "B<3>[j]", "A<3, 3>[i, k]", "B<3>[k]", "np<3>[i]",
               "z0<3>[j]", "C<4>[i + 1]", "C<4>[2 * j // 2]"]


@st.composite
def accesses(draw, rank=None):
    if rank is None and draw(st.integers(0, 3)):
        return draw(st.sampled_from(VALID_READS))  # mostly reads that fit, so that kernels get through
    name = draw(st.sampled_from(["A", "B", "C", "i", "np", "z0"]))
    rank = draw(st.integers(0, 3)) if rank is None else rank
    shape = ", ".join(draw(st.sampled_from(["1", "2", "3", "3", "0", "100000000000"])) for _ in range(rank))
    subscripts = ", ".join(draw(st.sampled_from(["i", "j", "k", "i + 1", "2 * j", "i - k", "k // 2", "3"]))
                           for _ in range(rank))
    return f"{name}<{shape}>[{subscripts}]" if draw(st.booleans()) else f"{name}[{subscripts}]"


@st.composite
def expressions(draw, depth=0):
    if depth > 3 or draw(st.integers(0, 2)) == 0:
        return draw(st.one_of(accesses(), st.sampled_from(NUMBERS), st.sampled_from(["i", "j", "k"])))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        op = draw(st.sampled_from(["+", "-", "*", "/", "+", "*", "//", "%", "<", "&&"]))
        return f"{draw(expressions(depth + 1))} {op} {draw(expressions(depth + 1))}"
    if kind == 1:
        return f"{draw(st.sampled_from(['-', '!', '']))}({draw(expressions(depth + 1))})"
    if kind == 2:
        function = draw(st.sampled_from(["exp", "max", "sqrt", "select", "tanh", "nosuch"]))
        args = ", ".join(draw(expressions(depth + 1)) for _ in range(draw(st.integers(0, 3))))
        return f"{function}({args})"
    return draw(accesses())


@st.composite
def kernels(draw):
    statements = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        target = draw(st.one_of(st.sampled_from(["O<3>[i]", "O<3, 3>[i, j]", "P<3>[j]"]),
                                accesses(rank=draw(st.integers(0, 2)))))
        text = f"{target} {draw(st.sampled_from(['=', '+=']))} {draw(expressions())}"
        if draw(st.integers(0, 3)) == 0:
            clauses = [draw(st.sampled_from(["j = i + 1", "k = i // 2", "i < 2", "j = i // 0", "i >= 1", "k = k"]))
                       for _ in range(draw(st.integers(1, 2)))]
            text += " where " + ", ".join(clauses)
        statements.append(text + ";")
    return "\n".join(statements)


@st.composite
def mutated(draw):
    seed = draw(st.sampled_from(SEEDS))
    pieces = seed.split(" ")
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(pieces)))
        action = draw(st.integers(0, 2))
        if action == 0 and pieces:
            pieces.pop(min(position, len(pieces) - 1))
        elif action == 1:
            pieces.insert(position, draw(TOKENS))
        elif pieces:
            pieces[min(position, len(pieces) - 1)] = draw(TOKENS)
    return " ".join(pieces)


def _try_everything(text: str) -> None:
    try:
        kernel = te.parse(text, dtype="float64")
        function = te.compile(kernel, "numpy")
        function(**{name: np.ones(kernel.shapes[name]) for name in kernel.inputs})
        for language in ("c++", "cuda", "numpy"):
            source = te.emit(kernel, language)
        compile(source, "<emitted>", "exec")
    except KuiperError:
        pass


@FUZZ
@given(kernels())
def test_kernels_from_the_grammar_parse_or_raise_kuiper_errors(monkeypatch_budget, text):
    _try_everything(text)


@FUZZ
@given(mutated())
def test_mutated_kernels_parse_or_raise_kuiper_errors(monkeypatch_budget, text):
    _try_everything(text)


@FUZZ
@given(st.lists(TOKENS, max_size=40).map(" ".join))
def test_token_soup_parses_or_raises_kuiper_errors(monkeypatch_budget, text):
    _try_everything(text)


@pytest.fixture(scope="module")
def monkeypatch_budget():
    """Every example runs under a 64 MiB budget: a kernel asking for more is a SizeLimitError."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KUIPER_MEMORY_BUDGET", "64MiB")
        yield
