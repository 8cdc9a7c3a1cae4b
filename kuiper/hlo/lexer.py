"""Split HLO text into tokens, in one linear pass of one regular expression.

Token kinds (``Token.kind``):
  NAME     an identifier, optionally ``%``-prefixed: ``%add.3``, ``get-tuple-element.1``, ``f32``, ``true``
  INT      ``3``, ``-1``
  FLOAT    ``1.5``, ``-2e-05``, ``inf``/``-inf``/``nan`` are NAMEs and become floats in literals
           (as does a NaN with a payload, ``-nan(0x7f)``, one NAME)
  STRING   ``"..."`` or ``'...'`` (mesh axis names) with backslash escapes (value: the unquoted text)
  SHAPE    a plain array shape as one token: ``f32[8,16]{1,0}``, ``pred[]`` (dynamic dims and
           tiled layouts lex piece by piece)
  RECORD   a flat ``{...}`` holding a string and no nested braces or brackets, as one token:
           ``metadata={op_name="a" stack_frame_id=2}``, ``frontend_attributes={x="y"}``.  These are
           most of a dump's tokens and nothing runs from them, so they are read by one regex.
  DIMS     digits joined by ``_`` or ``x``: windows ``3x3``, paddings ``2_0x0_0``, ``-1_0_2``
  LABELS   convolution dimension labels, ``b01f_01io->b01f``, ``f01b_i01o->01bf``, as one token (before
           NAME, which would stop at ``->`` and leave an output that starts with a digit)
  ...  ->  <=  { } ( ) [ ] , = : * ? ! @ punctuation; the kind is the text itself

Comments (``/*index=5*/``, ``// ...``) and whitespace are skipped.  Anything else is an
HloSyntaxError with the line and column of the offending character.

``iter_tokens`` is a generator: the parser pulls one token at a time, so the text is never held
twice (once as text, once as a token list) and an error early in a large file is found at once.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Iterator

from kuiper.errors import HloSyntaxError

from .shapes import ELEMENT_TYPES

NAME = "NAME"
RECORD = "RECORD"
SHAPE = "SHAPE"
INT = "INT"
FLOAT = "FLOAT"
STRING = "STRING"
DIMS = "DIMS"
LABELS = "LABELS"
END = "END"

# Order matters: labels before names (both may start with a letter), DIMS before numbers.
_TOKEN_RE = re.compile(
    r"""
    \s*(?:
      (?P<skip>/\*.*?\*/|//[^\n]*)
    | (?P<RECORD>\{[^{}"\[\]]*"(?:[^"\\\n]|\\.)*"(?:[^{}"\[\]]|"(?:[^"\\\n]|\\.)*")*\})
    | (?P<SHAPE>(?:TYPES)\[(?:[0-9]+(?:,[0-9]+)*)?\](?:\{(?:[0-9]+(?:,[0-9]+)*)?\})?(?![0-9A-Za-z_:{\[]))
    | (?P<NANPAYLOAD>-?nan\(0x[0-9a-fA-F]+\))
    | (?P<LABELS>[0-9a-z?]+_[0-9a-z?]+->[0-9a-z?]+)
    | (?P<NAME>%?[A-Za-z_](?:[A-Za-z0-9_.]|-(?!>))*)
    | (?P<DIMS>-?[0-9]+(?:[_x]-?[0-9]+)+(?![0-9.eE]))
    | (?P<FLOAT>-?(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+))
    | (?P<INT>-?[0-9]+)
    | (?P<STRING>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | (?P<NEGNAME>-(?:inf|nan)\b)
    | (?P<punct>\.\.\.|->|<=|[{}()\[\],=:*?!@<>+|#~])
    )
    """.replace("TYPES", "|".join(sorted(ELEMENT_TYPES, key=len, reverse=True))),
    re.VERBOSE | re.DOTALL,
)
_NEWLINE = re.compile("\n")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r"}


class Token:
    """One token: its kind, its text, and the offset of its first character."""

    __slots__ = ("kind", "position", "text")

    def __init__(self, kind: str, text: str, position: int):
        self.kind = kind
        self.text = text
        self.position = position

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.position})"


class SourceText:
    """The text being parsed and a way to turn a character offset into line and column."""

    def __init__(self, text: str, source: str = ""):
        self.text = text
        self.source = source
        self._newlines: array | tuple | None = None  # offsets of the text's newlines, once a second line is asked for

    def line_column(self, position: int) -> tuple[int, int]:
        # The first question (a syntax error, usually) counts the newlines before it: an error at the
        # top of a large text costs nothing. Later ones (a line for every op lowered) look the offset
        # up in a table of newlines built once, so naming N instructions is linear, not N times the text.
        if self._newlines is None:
            self._newlines = ()
            line = self.text.count("\n", 0, position) + 1
        else:
            if not isinstance(self._newlines, array):
                self._newlines = array("q", (match.start() for match in _NEWLINE.finditer(self.text)))
            line = bisect_left(self._newlines, position) + 1
        return line, position - (self.text.rfind("\n", 0, position) + 1) + 1

    def error(self, message: str, position: int) -> HloSyntaxError:
        line, column = self.line_column(position)
        start = self.text.rfind("\n", 0, position) + 1
        end = self.text.find("\n", start)
        line_text = self.text[start : end if end >= 0 else len(self.text)]
        if len(line_text) > 200:  # long lines: show a window around the column
            left = max(0, column - 100)
            line_text, column = line_text[left : left + 200], column - left
        return HloSyntaxError(message, self.source, line, column, line_text.expandtabs(1))


def iter_tokens(source: SourceText, start: int = 0, end: int | None = None) -> Iterator[Token]:
    """Tokens of ``source.text[start:end]``, with positions in the whole text, ending with END."""
    text = source.text
    end = len(text) if end is None else end
    expected = start  # where the next match must start; a gap is a character no token matches
    for match in _TOKEN_RE.finditer(text, start, end):  # each match: optional whitespace, then one token
        if match.start() != expected:
            _raise_bad_character(source, expected)
        expected = match.end()
        kind = match.lastgroup
        if kind == "skip":
            continue
        value = match.group(kind)
        if kind == "punct":
            kind = value
        elif kind in ("NEGNAME", "NANPAYLOAD"):  # words of literals: ``-inf``, ``-nan(0x7f)``
            kind = NAME
        yield Token(kind, value, expected - len(value))
    if expected != end and not text[expected:end].isspace():
        _raise_bad_character(source, expected)
    yield Token(END, "", end)


def _raise_bad_character(source: SourceText, position: int):
    text = source.text
    while position < len(text) - 1 and text[position].isspace():
        position += 1
    if text.startswith("/*", position):
        raise source.error("unterminated comment", position)
    if text[position] == '"':
        raise source.error("unterminated string", position)
    raise source.error(f"unexpected character {text[position]!r}", position)


def unquote(token_text: str) -> str:
    """The text of a STRING token without quotes, escapes resolved."""
    body = token_text[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)
