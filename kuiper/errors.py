"""The errors a user of kuiper can cause.

Every failure that bad input can trigger is a ``KuiperError`` subclass whose
message says *where* (file and line, op name and type, or input name) and
*what was expected*.  Catch ``KuiperError`` to catch them all.
"""

from __future__ import annotations


class KuiperError(Exception):
    """Base class of every error kuiper raises on purpose."""


class ModelFormatError(KuiperError):
    """A model file (``.pnnx.param`` / ``.pnnx.bin``) is malformed or inconsistent."""


class LanguageSyntaxError(ModelFormatError):
    """Text in one of kuiper's languages (a PNNX expression, a te kernel) cannot be parsed or is inconsistent.

    ``text`` is the source and ``position`` the 0-based offset of the problem; ``line`` and
    ``column`` (1-based, None without a position) say the same for people.  The message names
    them (the line only when the text has several) and shows that line with a caret under the
    spot.  ``context`` says where the text came from (which op of which model file) and leads
    the message; ``reason`` is the bare complaint, for re-raising with more context.
    """

    def __init__(self, message: str, text: str = "", position: int | None = None, context: str = ""):
        self.reason = message
        self.text = text
        self.position = position
        self.context = context
        self.line: int | None = None
        self.column: int | None = None
        if text and position is not None:
            offset = max(0, min(position, len(text)))
            line_start = text.rfind("\n", 0, offset) + 1
            line_end = text.find("\n", offset)
            line_text = text[line_start : line_end if line_end >= 0 else len(text)]
            self.line = text.count("\n", 0, offset) + 1
            self.column = offset - line_start + 1
            where = f"line {self.line}, column {self.column}" if "\n" in text else f"column {self.column}"
            message = f"{where}: {message}\n  {line_text}\n  {' ' * (self.column - 1)}^"
        super().__init__(f"{context}: {message}" if context else message)


class ExpressionSyntaxError(LanguageSyntaxError):
    """An expression string (``pnnx.Expression`` ``expr=``) cannot be parsed or lowered."""


class HloSyntaxError(ModelFormatError):
    """HLO text cannot be parsed, or names something undefined, or fails a verifier check.

    ``line`` and ``column`` are 1-based; the message quotes the line with a caret under the column.
    """

    def __init__(self, message: str, source: str = "", line: int = 0, column: int = 0, line_text: str = ""):
        self.reason = message
        self.source = source
        self.line = line
        self.column = column
        where = f"{source or '<hlo>'}:{line}:{column}: " if line else (f"{source}: " if source else "")
        text = f"{where}{message}"
        if line:
            text += f"\n  {line_text}\n  {' ' * max(0, column - 1)}^"
        super().__init__(text)


class OperatorParamError(ModelFormatError):
    """An op's parameter or weight is missing or has the wrong kind of value."""


class UnknownParamWarning(UserWarning):
    """An op in a model file has params kuiper does not know; they are ignored (``strict=True``: an error)."""


class PluginWarning(UserWarning):
    """A third-party plugin failed to load or one of its hooks raised; kuiper goes on without it."""


class UnsupportedOperatorError(KuiperError):
    """An op type is not registered, or an op uses a parameter value kuiper does not implement."""


class GraphError(ModelFormatError):
    """The graph is inconsistent: cycles, dangling operands, duplicate producers."""


class InputError(KuiperError):
    """A feed passed to a model is missing, unknown, or has the wrong dtype."""


class ShapeError(InputError):
    """A feed or an intermediate tensor has a shape the model cannot accept."""


class SizeLimitError(KuiperError):
    """A tensor would exceed the size budget (kuiper.limits); the message says who asked and how much."""


class BackendUnavailableError(KuiperError):
    """A backend name is unknown, or the backend cannot run on this machine."""


class UsageError(InputError):
    """A command-line invocation is wrong (the CLI exits with status 2, as for argparse's own errors)."""


class ConfigError(KuiperError):
    """A configuration file or environment variable holds an invalid value."""


class PluginError(KuiperError):
    """A plugin failed to load or registered something inconsistent."""


class IRError(KuiperError):
    """The tensor IR was asked to build something it cannot: a type error (``sub`` of two bool
    tensors), an unknown operation.  No file is at fault by itself: a frontend that lowers a
    file's expression catches this and re-raises it naming the file, line and expression."""


class WeightDroppedError(KuiperError):
    """A built model's IR was asked for the values of a weight the build folded into another op's weight and
    no longer keeps (``kuiper.model_ir.DroppedWeight``)."""


class DeviceMemoryError(KuiperError):
    """The accelerator ran out of memory; the message says how much was asked and what was free."""


class TESyntaxError(LanguageSyntaxError):
    """A tensor-expression kernel (``kuiper.te``) cannot be parsed or is inconsistent."""
