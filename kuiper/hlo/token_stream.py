"""The parser's view of the lexer: the current token, a short lookahead, and the nesting budget.

Tokens are pulled from ``iter_tokens`` one at a time (at most two ahead are held), so parsing
keeps no token list: memory stays near the size of the module being built.

Nested tuple shapes, literals and attribute braces are parsed recursively; ``MAX_NESTING`` bounds
how deep they may go, so deep input ends in an HloSyntaxError naming its line and column instead
of a RecursionError.  XLA's own dumps nest a few levels; 100 leaves room for any real module and
stays well inside Python's recursion limit (each level costs about three frames).
"""

from __future__ import annotations

from .lexer import END, NAME, SourceText, Token, iter_tokens

MAX_NESTING = 100


class TokenStream:
    def __init__(self, source: SourceText, start: int = 0, end: int | None = None):
        self.source = source
        self._tokens = iter_tokens(source, start, end)
        self._next = self._tokens.__next__
        self._ahead: list[Token] = []
        self.token: Token = self._next()  # the current token
        self.previous: Token = self.token
        self.depth = 0

    def peek(self, offset: int = 1) -> Token:
        """The token ``offset`` places after the current one (END past the end)."""
        while len(self._ahead) < offset:
            last = self._ahead[-1] if self._ahead else self.token
            self._ahead.append(last if last.kind == END else self._next())
        return self._ahead[offset - 1]

    def advance(self) -> Token:
        token = self.token
        if token.kind != END:
            self.previous = token
            self.token = self._ahead.pop(0) if self._ahead else self._next()
        return token

    def accept(self, kind: str) -> Token | None:
        token = self.token
        if token.kind != kind:
            return None
        if kind != END:  # the body of advance(), inlined: this is the parser's innermost step
            self.previous = token
            self.token = self._ahead.pop(0) if self._ahead else self._next()
        return token

    def accept_word(self, word: str) -> bool:
        if self.token.kind == NAME and self.token.text == word:
            self.advance()
            return True
        return False

    def expect(self, kind: str, what: str | None = None) -> Token:
        token = self.token
        if token.kind != kind:
            raise self.error(f"expected {what or repr(kind)}, found {self.describe(token)}", token)
        if kind != END:
            self.previous = token
            self.token = self._ahead.pop(0) if self._ahead else self._next()
        return token

    def name(self, what: str = "a name") -> str:
        return self.expect(NAME, what).text.removeprefix("%")

    @staticmethod
    def describe(token: Token) -> str:
        return "end of text" if token.kind == END else repr(token.text)

    def error(self, message: str, token: Token | None = None):
        return self.source.error(message, (token or self.token).position)

    def nest(self, what: str) -> None:
        """Enter one level of nesting (pair with ``unnest``); past MAX_NESTING, an error."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"{what} nest more than {MAX_NESTING} levels deep "
                             "(kuiper.hlo.token_stream.MAX_NESTING)")

    def unnest(self) -> None:
        self.depth -= 1
