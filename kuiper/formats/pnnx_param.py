"""Parser for the text half of a PNNX model: ``.pnnx.param``.

The grammar (see shared/PNNX-FORMAT.md, section 1)::

    7767517
    <op_count> <operand_count>
    <type> <name> <nin> <nout> <inputs...> <outputs...> [item ...]

Items are ``key=value`` params, ``@attr=(shape)dtype`` weights,
``$key=operand`` keyword bindings and ``#operand=(shape)dtype`` shapes.

Every problem raises ModelFormatError naming ``file:line``.  The weights are
not read here: ``parse_param`` returns the declared weight shapes and the
loader (``kuiper.formats.pnnx``) fetches their bytes.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelFormatError, OperatorParamError, UnknownParamWarning
from ..model_ir import OperandInfo, OpNode
from .pnnx_param_names import KNOWN_PARAMS

MAGIC = "7767517"

# PNNX dtype token -> numpy dtype name of the operand.  NumPy has no bfloat16 or
# complex32: such operands are computed one size wider (bf16 weights are widened
# to float32 by the loader too), so a bf16 model runs at float32 precision.
DTYPES = {
    "f32": "float32",
    "f64": "float64",
    "f16": "float16",
    "bf16": "float32",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "bool": "bool",
    "c64": "complex64",
    "c128": "complex128",
    "c32": "complex64",
}

# Params whose value is an expression to be kept verbatim.
RAW_PARAM_KEYS = frozenset({"expr"})

# No dimension is larger: element counts of any declared shape then fit in int64.
MAX_DIM = 2**40
MAX_COUNT = 10**18 - 1  # op, operand, input and output counts: any real file is far below
# Longer number tokens are refused (Python itself refuses int() beyond 4300 digits).
MAX_NUMBER_DIGITS = 400
_LONG_NUMBER = re.compile(rf"[0-9]{{{MAX_NUMBER_DIGITS + 1},}}")


@dataclass
class WeightDecl:
    """A ``@name=(shape)dtype`` item: the bytes live in the .bin zip entry ``<op>.<name>``."""

    shape: tuple[int, ...]
    dtype: str  # PNNX token, e.g. "f32"


@dataclass
class ParsedParam:
    ops: list[OpNode]
    operands: dict[str, OperandInfo]
    # weight declarations per op name, in file order
    weights: dict[str, dict[str, WeightDecl]] = field(default_factory=dict)


class _Where:
    """Formats ``file:line`` prefixes for error messages."""

    def __init__(self, path: str, line: int):
        self.path, self.line = path, line

    def error(self, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.path}:{self.line}: {message}")


# ---------------------------------------------------------------- values


def _looks_numeric(text: str) -> bool:
    """PNNX's test for a number: starts with a digit, or '-' then a digit."""
    return bool(text) and (text[0].isdigit() or (len(text) > 1 and text[0] == "-" and text[1].isdigit()))


def parse_scalar(text: str) -> Any:
    """Type one token: bool/None keywords, numbers (incl. inf/nan and complex), else a string."""
    if text == "True":
        return True
    if text == "False":
        return False
    if text == "None":
        return None
    if _looks_numeric(text) and len(text) > MAX_NUMBER_DIGITS:
        raise ValueError(f"the number '{text[:20]}...' has {len(text)} characters (at most {MAX_NUMBER_DIGITS})")
    if text.endswith("j") and _looks_numeric(text):
        try:
            return complex(text.replace("+-", "-"))
        except ValueError:
            return text
    if _looks_numeric(text):
        try:
            if "." in text or "e" in text or "E" in text:
                return float(text)
            return int(text)
        except ValueError:
            return text
    if text.lstrip("+-").lower() in ("inf", "nan", "infinity"):
        return float(text)
    return text


def parse_value(text: str) -> Any:
    """Type a param value the way PNNX writes it (see PNNX-FORMAT.md section 1).

    Lists are typed element by element, so a mixed list such as ``(0,@0)``
    keeps both elements; a one-element list ``(32)`` is still a list.
    """
    if "%" in text:
        return text
    if text in ("None", "()", "[]"):
        return None
    if text[:1] in ("(", "["):
        inner = text[1:-1]
        return [parse_scalar(element) for element in inner.split(",")]
    return parse_scalar(text)


def _parse_shape(text: str, where: _Where, what: str) -> tuple[tuple, str]:
    """``(1,3,?,224)f32`` -> ((1, 3, None, 224), "f32")."""
    if not text.startswith("(") or ")" not in text:
        raise where.error(f"{what}: expected '(d0,d1,...)dtype', found '{text}'")
    close = text.rindex(")")
    dims_text, dtype = text[1:close], text[close + 1 :]
    if dtype not in DTYPES:
        raise where.error(f"{what}: unknown dtype '{dtype}' (expected one of {', '.join(DTYPES)})")
    dims: list[int | None] = []
    if dims_text:
        for dim in dims_text.split(","):
            if dim == "?" or dim.startswith("%"):
                dims.append(None)
                continue
            dims.append(_parse_count(dim, where, f"{what}: a dimension", most=MAX_DIM, expected="a non-negative integer or '?'"))
    return tuple(dims), dtype


# ---------------------------------------------------------------- lines


def _parse_count(token: str, where: _Where, what: str, most: int = MAX_COUNT,
                 expected: str = "a non-negative integer") -> int:
    """A count or a dimension: an integer from 0 to ``most``, else an error naming ``what`` and the token.

    The length is checked before ``int()``, so a hostile file cannot make it build a huge number.
    """
    shown = token if len(token) <= 20 else token[:20] + "..."
    if len(token) > 20:
        value = most + 1 if token.isdigit() else None
    else:
        try:
            value = int(token)
        except ValueError:
            value = None
    if value is None or value < 0:
        raise where.error(f"{what} must be {expected}, found '{shown}'")
    if value > most:
        raise where.error(f"{what} is too large: {shown} (at most {most})")
    return value


def _parse_op_line(tokens: list[str], where: _Where, parsed: ParsedParam) -> OpNode:
    if len(tokens) < 4:
        raise where.error(
            f"truncated op line: expected '<type> <name> <ninputs> <noutputs> ...', found {len(tokens)} field(s)"
        )
    op_type, name = tokens[0], tokens[1]
    n_in = _parse_count(tokens[2], where, f"op '{name}': input count")
    n_out = _parse_count(tokens[3], where, f"op '{name}': output count")
    if len(tokens) < 4 + n_in + n_out:
        raise where.error(
            f"op '{name}' declares {n_in} input(s) and {n_out} output(s) "
            f"but the line has only {len(tokens) - 4} name(s) after the counts"
        )
    inputs = tokens[4 : 4 + n_in]
    outputs = tokens[4 + n_in : 4 + n_in + n_out]
    node = OpNode(type=op_type, name=name, inputs=list(inputs), outputs=list(outputs), source=f"{where.path}:{where.line}")
    weights: dict[str, WeightDecl] = {}

    for item in tokens[4 + n_in + n_out :]:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise where.error(f"op '{name}': item '{item}' is not of the form key=value")
        kind, bare = key[0], key[1:]
        if kind == "@":
            if bare in weights:
                raise where.error(f"op '{name}': weight '@{bare}' is declared twice")
            shape, dtype = _parse_shape(value, where, f"op '{name}' weight '{bare}'")
            if any(d is None for d in shape):
                raise where.error(f"op '{name}' weight '{bare}' has an unknown dimension in {value}")
            weights[bare] = WeightDecl(shape, dtype)
        elif kind == "$":
            # Bind the keyword to the first still-unnamed input using that operand.
            for index, operand in enumerate(node.inputs):
                if operand == value and node.input_keys[index] is None:
                    node.input_keys[index] = bare
                    break
            else:
                raise where.error(f"op '{name}': '${bare}={value}' names operand '{value}', which is not an input of this op")
        elif kind == "#":
            shape, dtype = _parse_shape(value, where, f"operand '{bare}' shape")
            info = parsed.operands.setdefault(bare, OperandInfo(bare))
            info.shape, info.dtype = shape, DTYPES[dtype]
        else:
            if not value:
                raise where.error(f"op '{name}': param '{key}' has an empty value")
            if key in node.params:
                raise where.error(f"op '{name}': param '{key}' is given twice")
            if key in RAW_PARAM_KEYS and _LONG_NUMBER.search(value):
                raise where.error(f"op '{name}': param '{key}' holds a number longer than {MAX_NUMBER_DIGITS} digits")
            try:
                node.params[key] = value if key in RAW_PARAM_KEYS else parse_value(value)
            except ValueError as exc:
                raise where.error(f"op '{name}': param '{key}': {exc}") from None
    if weights:
        parsed.weights[name] = weights
    return node


def parse_param(text: str, path: str = "<param>", strict: bool = False) -> ParsedParam:
    """Parse the whole ``.pnnx.param`` text; checks counts and names but not op semantics.

    Params that PNNX does not write for an op's type (see pnnx_param_names) give one
    UnknownParamWarning listing them all; ``strict=True`` raises OperatorParamError instead.
    """
    lines = text.splitlines()
    # Skip blank lines but remember their numbers for messages.
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    if not numbered:
        raise ModelFormatError(f"{path}: the file is empty (expected the magic number {MAGIC} on line 1)")
    line_no, first = numbered[0]
    if first.strip() != MAGIC:
        raise _Where(path, line_no).error(f"bad magic number '{first.strip()[:40]}' (expected {MAGIC}): not a PNNX param file")
    if len(numbered) < 2:
        raise _Where(path, line_no + 1).error("missing the '<op_count> <operand_count>' line")
    line_no, counts_line = numbered[1]
    where = _Where(path, line_no)
    counts = counts_line.split()
    if len(counts) != 2:
        raise where.error(f"expected '<op_count> <operand_count>', found '{counts_line.strip()}'")
    op_count = _parse_count(counts[0], where, "op count")
    operand_count = _parse_count(counts[1], where, "operand count")

    body = numbered[2:]
    if len(body) != op_count:
        at = body[-1][0] if body else line_no
        raise _Where(path, at).error(f"the header declares {op_count} op(s) but the file has {len(body)} op line(s)")

    parsed = ParsedParam(ops=[], operands={})
    op_names: dict[str, int] = {}
    producers: dict[str, int] = {}
    for line_no, line in body:
        where = _Where(path, line_no)
        node = _parse_op_line(line.split(), where, parsed)
        if node.name in op_names:
            raise where.error(f"duplicate op name '{node.name}' (first defined on line {op_names[node.name]})")
        op_names[node.name] = line_no
        for operand in node.outputs:
            if operand in producers:
                raise where.error(f"operand '{operand}' is produced twice (first by line {producers[operand]})")
            producers[operand] = line_no
            parsed.operands.setdefault(operand, OperandInfo(operand))
        parsed.ops.append(node)

    for node in parsed.ops:
        for operand in node.inputs:
            if operand not in producers:
                raise ModelFormatError(f"{node.source}: op '{node.name}' uses operand '{operand}', which no op defines")
    if len(producers) != operand_count:
        raise _Where(path, numbered[1][0]).error(
            f"the header declares {operand_count} operand(s) but the ops define {len(producers)}"
        )
    # Shapes given only for operands nobody produces were already rejected above;
    # drop stray '#' entries for names that are not operands.
    parsed.operands = {name: info for name, info in parsed.operands.items() if name in producers}
    _check_known_params(parsed.ops, path, strict)
    return parsed


def _check_known_params(ops: list[OpNode], path: str, strict: bool) -> None:
    """One warning (or, when strict, one error) naming every op with params kuiper does not know."""
    findings = []
    for node in ops:
        known = KNOWN_PARAMS.get(node.type)
        if known is None:
            continue
        unknown = [key for key in node.params if key not in known]
        if unknown:
            shown = ", ".join(unknown[:8]) + (f" and {len(unknown) - 8} more" if len(unknown) > 8 else "")
            findings.append(f"{node.source}: op '{node.name}' ({node.type}): {shown}")
    if not findings:
        return
    listing = "\n  ".join(findings[:10]) + (f"\n  ... and {len(findings) - 10} more op(s)" if len(findings) > 10 else "")
    message = f"{path}: params kuiper does not know (ignored; a newer PNNX?):\n  {listing}"
    if strict:
        raise OperatorParamError(message + "\n(strict=True refuses unknown params)")
    warnings.warn(message, UnknownParamWarning, stacklevel=3)
