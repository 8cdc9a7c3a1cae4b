"""Recursive-descent parser: kernel text -> Kernel of tensor-IR expressions.

    kernel     := statement+
    statement  := access ("=" | "+=") expr ["where" clause ("," clause)*] ";"
    clause     := NAME "=" expr          (bind an index variable)
                | expr                   (a condition on index variables)
    access     := NAME ["<" INT ("," INT)* ">"] "[" [expr ("," expr)*] "]"
    expr       := or;  or := and ("||" and)*;  and := cmp ("&&" cmp)*
    cmp        := sum [("<" | "<=" | ">" | ">=" | "==" | "!=") sum]
    sum        := product (("+" | "-") product)*
    product    := unary (("*" | "/" | "//" | "%") unary)*
    unary      := ("-" | "!") unary | primary
    primary    := INT | FLOAT | access | (NAME | "select") "(" args ")" | NAME | "(" expr ")"

Tokens (kuiper.lexing, with this language's TOKENS table): NAME, INT, FLOAT,
the keywords ``where`` and ``select``, and the operators and punctuation
themselves (``+=``, ``//``, ``&&``, ``<`` ...); ``#`` starts a comment.

A NAME followed by ``<`` is a tensor only when ``<INT, ...>[`` follows (else
it is an index variable compared with ``<``); the shape may be left out after
a tensor's first appearance.  Index variables are int64, tensors have the
kernel's dtype, and the typed constructors of kuiper.ir.make apply the
promotion rules, so the right-hand side is ordinary tensor IR.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager

import numpy

from kuiper.errors import IRError, TESyntaxError
from kuiper.ir import dtypes, make
from kuiper.ir.buffers import buffer
from kuiper.ir.nodes import Const, Indexing, IRExpr
from kuiper.ir.recursion import deep_recursion
from kuiper.lexing import END, FLOAT, INT, NAME, Token, TokenTable, tokenize
from kuiper.te.functions import call_function, is_function
from kuiper.limits import EXPRESSION_DEPTH
from kuiper.te.kernel import Kernel, SourceMap, Statement

_LOGICAL = {"||": "or", "&&": "and"}
_COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
_SUMS = {"+": "add", "-": "sub"}
_PRODUCTS = {"*": "mul", "/": "div", "//": "floordiv", "%": "mod"}
_ARITHMETIC = {**_SUMS, **_PRODUCTS}
KEYWORDS = frozenset({"where", "select"})
MAX_EXTENT = 2**62
TOKENS = TokenTable(
    error=TESyntaxError,
    symbols=("[", "]", "(", ")", ",", ";", "=", "+=", "!", *_LOGICAL, *_COMPARISONS, *_SUMS, *_PRODUCTS),
    keywords=KEYWORDS,
    comment="#",
)


def parse(text: str, dtype: str = "float32", inputs=None, outputs=None, name: str = "kernel") -> Kernel:
    """Parse a kernel; ``inputs``/``outputs`` fix the calling order (default: order of appearance)."""
    if dtype not in dtypes.TENSOR_DTYPES or not dtypes.is_float(dtype):
        raise TESyntaxError(f"a kernel's dtype must be a floating-point dtype, not {dtype!r}")
    with deep_recursion():  # room for EXPRESSION_DEPTH levels of brackets, ~12 frames each
        statements = _Parser(text, dtype).statements()
    return Kernel(statements, inputs=inputs, outputs=outputs, name=name)


class _Parser:
    def __init__(self, text: str, dtype: str):
        self.text = text
        self.dtype = dtype
        self.tokens = tokenize(text, TOKENS)
        self.pos = 0
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.source: SourceMap | None = None
        self.depths: dict[int, tuple[int, IRExpr]] = {}  # id(node) -> (depth, node) of what was built
        self.nesting = 0

    # --- token helpers ---------------------------------------------------------------

    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, offset: int) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.token
        self.pos += 1
        return token

    def accept(self, kind: str) -> Token | None:
        return self.advance() if self.token.kind == kind else None

    def expect(self, kind: str, what: str | None = None) -> Token:
        if self.token.kind != kind:
            found = "the end of the kernel" if self.token.kind == END else repr(self.token.text)
            self.error(f"expected {what or repr(kind)}, found {found}")
        return self.advance()

    def items(self, closing: str, item) -> list:
        """``item ("," item)*`` up to ``closing`` (left for the caller to expect); none when ``closing`` comes first."""
        found = []
        if self.token.kind != closing:
            found.append(item())
            while self.accept(","):
                found.append(item())
        return found

    def error(self, message: str, position: int | None = None):
        raise TESyntaxError(message, self.text, self.token.position if position is None else position)

    def typed(self, build, position: int, *operands: IRExpr):
        """Run a make.* constructor on ``operands``, turning its type errors into errors at ``position``.

        The result's depth (1 + its deepest operand's) is kept against the budget, so that no
        tree is too deep for the recursive passes downstream (a 20,000-term sum is an error here).
        """
        try:
            node = build()
        except IRError as exc:
            self.error(str(exc), position)
        if any(_overflowed(n) for n in (node, *node.children())):  # 1e308 + i is float32 arithmetic: inf
            self.error(f"a number overflows {node.dtype} here", position)
        depth = 1 + max((self.depth(o) for o in operands), default=0)
        if depth > EXPRESSION_DEPTH:
            self.error(
                f"the expression nests deeper than {EXPRESSION_DEPTH} operations; split it into "
                "several statements accumulating with '+='",
                position,
            )
        self.depths[id(node)] = (depth, node)  # the node is kept so that its id stays its own
        return node

    def depth(self, node: IRExpr) -> int:
        return self.depths.get(id(node), (1, None))[0]

    @contextmanager
    def nested(self):
        """Around each recursive descent (parentheses, arguments, subscripts): a budget, not a RecursionError."""
        if self.nesting >= EXPRESSION_DEPTH:
            self.error(f"brackets nest deeper than {EXPRESSION_DEPTH} levels")
        self.nesting += 1
        try:
            yield
        finally:
            self.nesting -= 1

    # --- statements ---------------------------------------------------------------

    def statements(self) -> list[Statement]:
        result = []
        while self.token.kind != END:
            result.append(self.statement())
        if not result:
            self.error("expected at least one statement 'Out<shape>[i, ...] = expression;'")
        return result

    def statement(self) -> Statement:
        self.source = SourceMap(self.text, self.token.position)
        if self.token.kind != NAME and self.token.kind not in KEYWORDS:
            self.error("a statement starts with the tensor it writes, e.g. 'C<4, 16>[i, j] = ...'")
        target = self.access()
        if self.token.kind not in ("=", "+="):
            self.error("expected '=' or '+=' after the written tensor")
        accumulate = self.advance().kind == "+="
        value_position = self.token.position
        value = self.expr()
        if value.dtype in ("bool", "pybool"):
            self.error("the right-hand side is a condition, not a number", value_position)
        value = make.cast(value, self.dtype)
        bindings, conditions = [], []
        if self.token.kind == "where":
            self.advance()
            while True:
                if self.token.kind == NAME and self.peek(1).kind == "=":
                    name_token = self.advance()
                    self.advance()
                    self.source.names.setdefault(name_token.text, name_token.position)
                    bindings.append((make.var(name_token.text, "int64"), self.index_expr()))
                else:
                    position = self.token.position
                    cond = self.expr()
                    if cond.dtype != "bool":
                        self.error("a where clause holds 'name = index expression' or a condition", position)
                    if _reads_tensor(cond):
                        self.error("a where condition is on index variables; test values with select()", position)
                    if _has_float(cond):
                        self.error("a where condition compares integer index arithmetic", position)
                    conditions.append(cond)
                if not self.accept(","):
                    break
        self.expect(";", "';' at the end of the statement")
        return Statement(target, value, accumulate, tuple(bindings), tuple(conditions), self.source)

    # --- expressions --------------------------------------------------------------------

    def expr(self) -> IRExpr:
        return self.left_fold(("||",), self.conjunction, self.logical)

    def conjunction(self) -> IRExpr:
        return self.left_fold(("&&",), self.comparison, self.logical)

    def comparison(self) -> IRExpr:
        lhs = self.sum()
        if self.token.kind in _COMPARISONS:
            token = self.advance()
            rhs = self.sum()
            lhs = self.typed(
                lambda: _as_tensor_bool(make.compare(_COMPARISONS[token.kind], lhs, rhs)), token.position, lhs, rhs
            )
        return lhs

    def sum(self) -> IRExpr:
        return self.left_fold(_SUMS, self.product, self.arithmetic)

    def product(self) -> IRExpr:
        return self.left_fold(_PRODUCTS, self.unary, self.arithmetic)

    def left_fold(self, operators, operand, build) -> IRExpr:
        """``operand (operator operand)*`` for the operator tokens in ``operators``, grouped from the left.

        ``build(token, lhs, rhs)`` makes each node; it runs inside typed(), which words its type errors.
        """
        lhs = operand()
        while self.token.kind in operators:
            token = self.advance()
            rhs = operand()
            lhs = self.typed(functools.partial(build, token, lhs, rhs), token.position, lhs, rhs)
        return lhs

    def logical(self, token: Token, lhs: IRExpr, rhs: IRExpr) -> IRExpr:
        if lhs.dtype not in ("bool", "pybool") or rhs.dtype not in ("bool", "pybool"):
            self.error(f"{token.kind} joins conditions", token.position)
        return _as_tensor_bool(make.bitwise(_LOGICAL[token.kind], lhs, rhs))

    def arithmetic(self, token: Token, lhs: IRExpr, rhs: IRExpr) -> IRExpr:
        op = _ARITHMETIC[token.kind]
        if op in ("floordiv", "mod") and (dtypes.is_float(lhs.dtype) or dtypes.is_float(rhs.dtype)):
            self.error(f"{token.kind} takes integers (index arithmetic)", token.position)
        if op in ("floordiv", "mod") and isinstance(rhs, Const) and rhs.value == 0:
            self.error(f"{token.kind} by zero", token.position)
        return make.div(lhs, rhs) if op == "div" else make.arith(op, lhs, rhs)

    def unary(self) -> IRExpr:
        prefixes = []  # read in a loop: 10,000 signs in a row are no recursion
        while self.token.kind in ("-", "!"):
            prefixes.append(self.advance())
        operand = self.primary()
        for token in reversed(prefixes):
            operand = self.prefix(token, operand)
        return operand

    def prefix(self, token: Token, operand: IRExpr) -> IRExpr:
        if token.kind == "-":
            if isinstance(operand, Const) and not isinstance(operand.value, bool):
                return make.const(-operand.value, operand.dtype)
            return self.typed(lambda: make.neg(operand), token.position, operand)
        return self.typed(lambda: _as_tensor_bool(make.logical_not(operand)), token.position, operand)

    def primary(self) -> IRExpr:
        token = self.token
        if token.kind in (INT, FLOAT):
            self.advance()
            if token.kind == FLOAT and not abs(token.value) <= float(numpy.finfo(self.dtype).max):
                self.error(f"{token.text} is out of range for {self.dtype}")
            if token.kind == INT and token.value > MAX_EXTENT:  # index arithmetic is C's long long
                self.error(f"{token.text} is over 2^62")
            return make.const(token.value)
        if self.accept("("):
            with self.nested():
                inner = self.expr()
            self.expect(")", "')'")
            return inner
        if token.kind == "where":
            self.error("'where' must follow the right-hand side")
        if token.kind == "select" and self.peek(1).kind != "(":
            self.error("select takes (condition, value if true, value if false)")
        if token.kind not in (NAME, "select"):
            found = "the end of the kernel" if token.kind == END else repr(token.text)
            self.error(f"expected a number, tensor, index or function call, found {found}")
        if self.peek(1).kind == "(":
            return self.call()
        if self.peek(1).kind == "[" or (self.peek(1).kind == "<" and self._shape_follows()):
            return self.access()
        self.advance()
        self.source.names.setdefault(token.text, token.position)
        return make.var(token.text, "int64")

    def _shape_follows(self) -> bool:
        offset = 2
        while self.peek(offset).kind == INT:
            if self.peek(offset + 1).kind == ">":
                return self.peek(offset + 2).kind == "["
            if self.peek(offset + 1).kind != ",":
                return False
            offset += 2
        return False

    def call(self) -> IRExpr:
        name = self.advance()
        self.advance()  # '('
        with self.nested():
            args = self.items(")", self.expr)
        self.expect(")", "')' after the arguments")
        if name.kind == "select":
            if len(args) != 3:
                self.error("select takes (condition, value if true, value if false)", name.position)
            return self.typed(lambda: make.select(*args), name.position, *args)
        if not is_function(name.text, len(args)):
            self.error(f"unknown function {name.text} with {len(args)} argument(s)", name.position)
        return self.typed(lambda: call_function(name.text, args, self.dtype), name.position, *args)

    def access(self) -> IRExpr:
        if self.token.kind in KEYWORDS:
            self.error(f"{self.token.text} is a keyword, not a tensor name")
        name = self.expect(NAME, "a tensor name")
        shape = None
        if self.accept("<"):
            dims = [self.expect(INT, "a dimension").value]
            while self.accept(","):
                dims.append(self.expect(INT, "a dimension").value)
            self.expect(">", "'>' after the shape")
            if any(d <= 0 for d in dims):
                self.error(f"{name.text} has a dimension that is not positive", name.position)
            if any(d > MAX_EXTENT for d in dims):  # loop bounds are C's long long
                self.error(f"{name.text} has a dimension over 2^62", name.position)
            shape = tuple(dims)
            self.shapes.setdefault(name.text, shape)
        elif name.text in self.shapes:
            shape = self.shapes[name.text]
        else:
            self.error(
                f"{name.text} has no shape: write {name.text}<d0, d1, ...>[...] where it first appears", name.position
            )
        self.expect("[", "'[' and the subscripts")
        with self.nested():
            indices = self.items("]", self.index_expr)
        self.expect("]", "']' after the subscripts")
        node = self.typed(lambda: buffer(name.text, shape, self.dtype)[tuple(indices)], name.position, *indices)
        self.source.nodes.setdefault(node, name.position)
        return node

    def index_expr(self) -> IRExpr:
        position = self.token.position
        index = self.sum()
        if index.dtype not in ("int64", "pyint") or _reads_tensor(index):
            self.error("a subscript is integer arithmetic on index variables (+ - * // %)", position)
        return make.cast(index, "int64")


def _reads_tensor(expr: IRExpr) -> bool:
    return isinstance(expr, Indexing) or any(_reads_tensor(c) for c in expr.children())


def _overflowed(node: IRExpr) -> bool:
    return isinstance(node, Const) and isinstance(node.value, float) and not math.isfinite(node.value)


def _has_float(expr: IRExpr) -> bool:
    return dtypes.is_float(expr.dtype) or any(_has_float(c) for c in expr.children())


def _as_tensor_bool(expr: IRExpr) -> IRExpr:
    return make.cast(expr, "bool") if expr.dtype == "pybool" else expr
