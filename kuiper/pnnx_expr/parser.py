"""Parse a pnnx.Expression string into an AST.

PNNX's own reader does not trust parentheses: it splits on ``( ) , ]``,
throws them away (``[`` stays a token), and folds the remaining tokens
right to left with a stack, using each function's fixed arity.  PNNX relies
on that: its constant-folding pass re-prints ``log1p(x)+x`` as
``add(log1p,@0),@0`` - wrong parentheses, right token order.  So we do the
same: the parentheses only have to be well-formed (balanced, each ``(``
right after a function name, no empty arguments), the meaning comes from
the token order.

Tokens (kuiper.lexing, with this language's TOKENS table): NAME (``add``,
``torch.float``: PNNX spells casts with a dot), the constants ``True``,
``False``, ``None`` (keywords), INPUT ``@3`` (value 3), INT ``2`` ``-1``, FLOAT
``2.0`` ``1.000000e-05`` ``-inf`` ``nan``, COMPLEX ``1.0+-2.0j`` ``1.0-2.0j``
``3j``, and the punctuation ``( ) , [ ]``.  Numbers carry their sign: PNNX
writes calls (``sub(@0,1)``), never operators, so a ``-`` can only begin a
literal.  Whitespace is skipped (PNNX never writes any).

The fold is iterative, so no input can overflow Python's stack; trees deeper
than MAX_DEPTH are rejected so that the recursive passes downstream are safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuiper.errors import ExpressionSyntaxError
from kuiper.lexing import COMPLEX, FLOAT, INT, NAME, Token, TokenTable, tokenize
from kuiper.pnnx_expr.functions import FUNCTIONS
from kuiper.pnnx_expr.nodes import Call, Expr, Input, ListExpr, Literal, Size

MAX_DEPTH = 256
INPUT = "INPUT"
CONSTANTS = {"True": True, "False": False, "None": None}
TOKENS = TokenTable(
    error=ExpressionSyntaxError,
    symbols=("(", ")", "[", "]", ","),
    keywords=frozenset(CONSTANTS),
    dotted_names=True,
    prefixed_integers={"@": INPUT},
    signed_numbers=True,
    inf_nan=True,
    complex_numbers=True,
)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_ATOM_KINDS = (NAME, INPUT, INT, FLOAT, COMPLEX, *CONSTANTS)


@dataclass(frozen=True)
class _Item:
    """A parsed sub-expression on the fold stack, with where it starts."""

    expr: Expr
    position: int
    depth: int


def parse(text: str, num_inputs: int | None = None) -> Expr:
    """Parse ``text``; with ``num_inputs``, ``@N`` must satisfy N < num_inputs."""
    if not isinstance(text, str):
        raise ExpressionSyntaxError(f"an expression must be a string, not {type(text).__name__}")
    tokens = tokenize(text, TOKENS)[:-1]  # the fold needs no END marker
    if not tokens:
        raise ExpressionSyntaxError("empty expression", text, 0)
    _check_punctuation(tokens, text)
    is_list = tokens[0].kind == "["
    atoms = [t for t in tokens if t.kind in _ATOM_KINDS]
    items = _fold(atoms, text, num_inputs, whole=not is_list)
    if is_list:
        return ListExpr(tuple(item.expr for item in items))
    if not items:
        raise ExpressionSyntaxError("empty expression", text, 0)
    if len(items) > 1:
        raise ExpressionSyntaxError(
            "unexpected extra expression: the expression already ended", text, items[1].position
        )
    return items[0].expr


def _check_punctuation(tokens: list[Token], text: str) -> None:
    """Reject bracket garbage while allowing PNNX's misplaced-but-balanced parentheses."""
    open_parens: list[Token] = []
    previous: Token | None = None
    for index, token in enumerate(tokens):
        kind = token.kind
        after = previous.kind if previous is not None else None
        if kind == "[":
            if index != 0:
                raise ExpressionSyntaxError("'[' may only open a list at the very start", text, token.position)
        elif kind == "]":
            if tokens[0].kind != "[":
                raise ExpressionSyntaxError("']' without a matching '['", text, token.position)
            if index != len(tokens) - 1:
                raise ExpressionSyntaxError("']' must end the expression", text, token.position)
            if after == ",":
                raise ExpressionSyntaxError("empty list item before ']'", text, token.position)
        elif kind == "(":
            if after in CONSTANTS:
                raise ExpressionSyntaxError(f"{after} is a constant, not a function", text, previous.position)
            if after != NAME:
                raise ExpressionSyntaxError("'(' must follow a function name", text, token.position)
            if previous.text not in FUNCTIONS and previous.text != "size":
                raise ExpressionSyntaxError(f"unknown function {previous.text!r}", text, previous.position)
            open_parens.append(token)
        elif kind == ")":
            if not open_parens:
                raise ExpressionSyntaxError("unbalanced ')': nothing to close", text, token.position)
            if after in ("(", ","):
                raise ExpressionSyntaxError("empty argument before ')'", text, token.position)
            open_parens.pop()
        elif kind == ",":
            if after in (None, "(", ",", "["):
                raise ExpressionSyntaxError("empty argument before ','", text, token.position)
        elif after not in (None, "(", ",", "["):
            raise ExpressionSyntaxError(f"missing ',' before {token.text!r}", text, token.position)
        previous = token
    if open_parens:
        raise ExpressionSyntaxError("'(' is never closed", text, open_parens[-1].position)
    if tokens[0].kind == "[" and tokens[-1].kind != "]":
        raise ExpressionSyntaxError("'[' is never closed", text, tokens[0].position)
    if previous.kind == ",":
        raise ExpressionSyntaxError("expression ends with ','", text, previous.position)


def _fold(atoms: list[Token], text: str, num_inputs: int | None, whole: bool) -> list[_Item]:
    """Fold tokens right to left; returns the finished items, leftmost first."""
    stack: list[_Item] = []
    for index in range(len(atoms) - 1, -1, -1):
        token = atoms[index]
        if token.kind == NAME and token.text in FUNCTIONS:
            stack.append(_apply(token, stack, text))
        elif token.kind == NAME and token.text == "size":
            is_whole_expression = whole and index == 0 and len(atoms) == 2
            stack.append(_size(token, stack, text, is_whole_expression))
        else:
            stack.append(_atom(token, text, num_inputs))
    return stack[::-1]


def _apply(token: Token, stack: list[_Item], text: str) -> _Item:
    info = FUNCTIONS[token.text]
    if len(stack) < info.arity:
        found = f"only {len(stack)} follow" if stack else "none follow"
        raise ExpressionSyntaxError(
            f"{info.name} takes {info.arity} argument{'s' if info.arity > 1 else ''} but {found}",
            text,
            token.position,
        )
    args = [stack.pop() for _ in range(info.arity)]  # the top of the stack is the first argument
    depth = 1 + max(arg.depth for arg in args)
    if depth > MAX_DEPTH:
        raise ExpressionSyntaxError(f"expression nested deeper than {MAX_DEPTH} calls", text, token.position)
    return _Item(Call(info.name, tuple(arg.expr for arg in args)), token.position, depth)


def _size(token: Token, stack: list[_Item], text: str, is_whole_expression: bool) -> _Item:
    usage = "size(@N,d) needs an input and an integer dimension; size(@N) may only be the whole expression"
    if not stack or not isinstance(stack[-1].expr, Input):
        raise ExpressionSyntaxError(usage, text, token.position)
    source = stack.pop()
    if is_whole_expression:
        return _Item(Size(source.expr, None), token.position, source.depth + 1)
    if not stack or not _is_int_literal(stack[-1].expr):
        raise ExpressionSyntaxError(usage, text, token.position)
    dim = stack.pop()
    return _Item(Size(source.expr, dim.expr.value), token.position, 2)


def _atom(token: Token, text: str, num_inputs: int | None) -> _Item:
    if token.kind == INPUT:
        if num_inputs is not None and token.value >= num_inputs:
            plural = "input" if num_inputs == 1 else "inputs"
            raise ExpressionSyntaxError(
                f"@{token.value} refers to a missing input: the op has {num_inputs} {plural}",
                text,
                token.position,
            )
        return _Item(Input(token.value), token.position, 1)
    if token.kind == INT:
        if not _INT64_MIN <= token.value <= _INT64_MAX:
            raise ExpressionSyntaxError("integer literal does not fit in 64 bits", text, token.position)
        return _Item(Literal(token.value), token.position, 1)
    if token.kind in (FLOAT, COMPLEX):
        return _Item(Literal(token.value), token.position, 1)
    if token.kind in CONSTANTS:
        return _Item(Literal(CONSTANTS[token.kind]), token.position, 1)
    raise ExpressionSyntaxError(f"unknown function {token.text!r}", text, token.position)


def _is_int_literal(expr: Expr) -> bool:
    return isinstance(expr, Literal) and type(expr.value) is int
