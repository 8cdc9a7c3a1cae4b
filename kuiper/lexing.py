"""One lexer for kuiper's small languages, driven by a token table per language.

The PNNX expression language (kuiper.pnnx_expr) and the tensor-expression
language (kuiper.te) differ only in their tables: which names, keywords,
punctuation and operators, number forms and comments they have.  Both get the
same tokens, the same positions and the same errors from here.

    tokenize(text, table) -> [Token, ..., Token(END)]

A token's ``kind`` is NAME, INT, FLOAT, COMPLEX, a prefixed-integer kind of the
language (PNNX's ``@3`` is INPUT), or, for keywords, punctuation and
operators, the text itself (``"where"``, ``"("``, ``"+="``).  ``position`` is
the 0-based offset into the text; every error is the table's error class (a
kuiper.errors.LanguageSyntaxError), which turns that offset into line, column
and a caret.  The HLO frontend keeps its own lexer: HLO text is a different
kind of language (types, shapes, attributes), not a table away from these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kuiper.errors import LanguageSyntaxError

NAME = "NAME"
INT = "INT"
FLOAT = "FLOAT"
COMPLEX = "COMPLEX"
END = "END"

_UNSIGNED_REAL = r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DIGITS_RE = re.compile(r"[0-9]+")
_INF_NAN = ("inf", "nan")


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    position: int
    value: object = None


@dataclass(frozen=True)
class TokenTable:
    """What one language's tokens look like."""

    error: type[LanguageSyntaxError]
    symbols: tuple[str, ...]  # punctuation and operators; each is its own kind
    keywords: frozenset[str] = frozenset()  # names that are their own kind
    comment: str | None = None  # starts a comment that runs to the end of the line
    dotted_names: bool = False  # ``torch.float`` is one NAME
    prefixed_integers: dict[str, str] = field(default_factory=dict)  # {"@": "INPUT"}: @3 has value 3
    # Number forms beyond unsigned decimals with an optional exponent:
    signed_numbers: bool = False  # '+'/'-' begin a literal (the language has no arithmetic operators)
    inf_nan: bool = False  # ``inf`` and ``nan`` are float literals
    complex_numbers: bool = False  # ``3j``; with signed numbers also ``1.0+2.0j``, ``1.0+-2.0j``, ``1.0-2.0j``
    # Derived from the fields above:
    name_re: re.Pattern = field(init=False, repr=False)
    real_re: re.Pattern = field(init=False, repr=False)

    def __post_init__(self):
        # Longest first, so that '//' wins over '/' and '<=' over '<'.
        object.__setattr__(self, "symbols", tuple(sorted(self.symbols, key=len, reverse=True)))
        name = rf"{_NAME}(?:\.{_NAME})*" if self.dotted_names else _NAME
        object.__setattr__(self, "name_re", re.compile(name))
        real = rf"(?:{_UNSIGNED_REAL}|inf|nan)" if self.inf_nan else _UNSIGNED_REAL
        object.__setattr__(self, "real_re", re.compile(("[+-]?" if self.signed_numbers else "") + real))


def tokenize(text: str, table: TokenTable) -> list[Token]:
    """The tokens of ``text``, whitespace and comments skipped, with an END token last."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        if table.comment and text.startswith(table.comment, pos):
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
            continue
        token = _read_token(text, pos, table)
        tokens.append(token)
        pos += len(token.text)
    tokens.append(Token(END, "", len(text)))
    return tokens


def _read_token(text: str, pos: int, table: TokenTable) -> Token:
    for read in (_prefixed_integer, _number, _name, _symbol):
        token = read(text, pos, table)
        if token is not None:
            return token
    raise table.error(f"unexpected character {text[pos]!r}", text, pos)


def _prefixed_integer(text: str, pos: int, table: TokenTable) -> Token | None:
    prefix = text[pos]
    kind = table.prefixed_integers.get(prefix)
    if kind is None:
        return None
    digits = _DIGITS_RE.match(text, pos + 1)
    if digits is None:
        raise table.error(f"expected a number after {prefix!r}, as in {prefix}0", text, pos)
    return Token(kind, text[pos : digits.end()], pos, int(digits.group()))


def _name(text: str, pos: int, table: TokenTable) -> Token | None:
    match = table.name_re.match(text, pos)
    if match is None:
        return None
    name = match.group()
    return Token(name if name in table.keywords else NAME, name, pos)


def _symbol(text: str, pos: int, table: TokenTable) -> Token | None:
    symbol = next((s for s in table.symbols if text.startswith(s, pos)), None)
    return None if symbol is None else Token(symbol, symbol, pos)


def _number(text: str, pos: int, table: TokenTable) -> Token | None:
    """A real, imaginary (``2j``) or complex (``1.0+-2.0j``) literal at pos, as the table allows."""
    if not _starts_number(text, pos, table):
        return None
    real = table.real_re.match(text, pos)
    if real is None:
        if text[pos] in "+-":  # with signed numbers, a sign can only begin a literal
            raise table.error("malformed number", text, pos)
        return None  # a lone '.': not a number, maybe punctuation
    end = real.end()
    kind = FLOAT if _looks_float(real.group()) else INT
    value: object = float(real.group()) if kind == FLOAT else int(real.group())
    if table.complex_numbers:
        kind, value, end = _complex_tail(text, real, kind, value, table)
    if end < len(text) and _continues_a_word(text[end], table):
        raise table.error("malformed number", text, pos)
    if table.signed_numbers and kind != COMPLEX and text.startswith(("+", "-"), end):
        hint = " (a complex literal is written like 1.0+-2.0j)" if table.complex_numbers else ""
        raise table.error(f"malformed number{hint}", text, pos)
    return Token(kind, text[pos:end], pos, value)


def _starts_number(text: str, pos: int, table: TokenTable) -> bool:
    char = text[pos]
    if char.isdigit() or char == ".":
        return True
    if char in "+-":
        return table.signed_numbers
    if table.inf_nan and text.startswith(_INF_NAN, pos):
        # 'inf', 'nanj', 'inf+nanj' are numbers; 'info' is a name.
        word = table.name_re.match(text, pos).group()
        return word in _INF_NAN or (table.complex_numbers and word in ("infj", "nanj"))
    return False


def _complex_tail(text: str, real: re.Match, kind: str, value: object, table: TokenTable):
    """Extend a real literal to an imaginary or complex one when a ``j`` says so."""
    end = real.end()
    if text.startswith("j", end):
        return COMPLEX, complex(0.0, float(real.group())), end + 1
    if table.signed_numbers and text.startswith(("+", "-"), end):
        # 1.0+2.0j, 1.0+-2.0j and, as pnnx prints a negative imaginary part, 1.0-2.0j.  Only where
        # numbers are signed: in a language with a '+' operator, 1.0+2.0j is a sum.
        imag = table.real_re.match(text, end + 1 if text[end] == "+" else end)
        if imag is not None and text.startswith("j", imag.end()):
            return COMPLEX, complex(float(real.group()), float(imag.group())), imag.end() + 1
    return kind, value, end


def _continues_a_word(char: str, table: TokenTable) -> bool:
    """A number glued to a name character (``2abc``, ``1.2.3``, ``1e``) is malformed."""
    return (char.isascii() and char.isalnum()) or char in "_." or char in table.prefixed_integers


def _looks_float(number: str) -> bool:
    return any(c in number for c in ".eEn")  # '.', exponent, inf, nan
