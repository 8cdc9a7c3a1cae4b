"""``kuiper te grad CASE.json [-o FILE.cc]`` and ``kuiper te run KERNEL -i NAME=FILE.npy ...``.

A case file is the compiler course's JSON: ``name``, ``ins``, ``outs``,
``data_type`` (float or double), ``kernel`` and ``grad_to``.  ``kuiper te run``
also takes a plain text file holding the kernel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kuiper.errors import TESyntaxError, UsageError
from kuiper.te import compile, emit, grad, parse  # noqa: A004 - kuiper.te.compile is the public name
from kuiper.user_files import check_output_file, read_feeds, text_output_argument, write_arrays, write_text

_DTYPES = {"float": "float32", "float32": "float32", "double": "float64", "float64": "float64"}
_CASE_KEYS = {"name": str, "ins": list, "outs": list, "data_type": str, "kernel": str, "grad_to": list}


def add_te_command(sub) -> None:
    te = sub.add_parser("te", help="tensor expressions: differentiate a kernel, emit its code, run it")
    commands = te.add_subparsers(dest="te_command", metavar="TE_COMMAND")
    commands.required = True

    grad = commands.add_parser("grad", help="write the gradient kernel of a course-format CASE.json")
    grad.add_argument("case", help="JSON with name, ins, outs, data_type, kernel, grad_to")
    grad.add_argument("--output", "-o", type=text_output_argument, help="write here instead of to stdout (-: stdout)")
    grad.add_argument(
        "--language",
        "-l",
        default="c++",
        choices=["c++", "cuda", "numpy", "te"],
        help="c++ (default: the course's signature), cuda, numpy, or te (the kernel language)",
    )
    grad.set_defaults(func=cmd_grad)

    run = commands.add_parser("run", help="evaluate a kernel (a case .json or a text file) on .npy inputs")
    run.add_argument("kernel", help="a course-format .json, or a text file holding the kernel")
    run.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="an input tensor from a .npy file, or a .npz keyed by tensor name; repeatable",
    )
    run.add_argument("--output", "-o", help="save the outputs to this .npz (keyed by output name)")
    run.add_argument("--dtype", default=None, help="float32 or float64 (default: the case's data_type, else float32)")
    run.add_argument("--backend", help="backend name (see `kuiper backends`)")
    run.set_defaults(func=cmd_run)


def read_case(path: str) -> dict:
    try:
        case = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise TESyntaxError(f"{path}: cannot read a JSON case ({exc})") from None
    if not isinstance(case, dict):
        raise TESyntaxError(f"{path}: a case is a JSON object with keys {sorted(_CASE_KEYS)}")
    for key, kind in _CASE_KEYS.items():
        if not isinstance(case.get(key), kind):
            raise TESyntaxError(f"{path}: key {key!r} must be a {kind.__name__}, found {case.get(key)!r}")
    if case["data_type"] not in _DTYPES:
        raise TESyntaxError(f"{path}: data_type {case['data_type']!r} is not one of {sorted(_DTYPES)}")
    return case


def _parse_case(case: dict, path: str, dtype: str | None = None):
    try:
        return parse(
            case["kernel"],
            dtype=dtype or _DTYPES[case["data_type"]],
            inputs=case["ins"],
            outputs=case["outs"],
            name=case["name"],
        )
    except TESyntaxError as exc:
        raise TESyntaxError(f"{path}: {exc}") from None


def cmd_grad(args) -> int:
    if args.output:
        check_output_file(args.output, f"--output {args.output}")
    case = read_case(args.case)
    kernel = _parse_case(case, args.case)
    gradient = grad(kernel, case["grad_to"], name=case["name"])
    text = str(gradient) + "\n" if args.language == "te" else emit(gradient, args.language, name=case["name"])
    if args.output:
        write_text(args.output, text, f"--output {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_run(args) -> int:
    if args.output and Path(args.output).suffix.lower() != ".npz":
        raise UsageError(f"--output {args.output}: the outputs are saved as one .npz; name it FILE.npz")
    if args.output:
        check_output_file(args.output, f"--output {args.output}")
    dtype = _DTYPES.get(args.dtype, args.dtype) if args.dtype else None
    path = args.kernel
    if path.endswith(".json"):
        kernel = _parse_case(read_case(path), path, dtype)
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TESyntaxError(f"{path}: cannot read the kernel ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise TESyntaxError(f"{path}: not a text file (a kernel is UTF-8 text, or a case .json)") from None
        try:
            kernel = parse(text, dtype=dtype or "float32")
        except TESyntaxError as exc:
            raise TESyntaxError(f"{path}: {exc}") from None
    feeds = read_feeds(args.input)
    function = compile(kernel, args.backend)
    outputs = {name: function.backend.to_numpy(value) for name, value in function(**feeds).items()}
    if args.output:
        write_arrays(args.output, outputs, f"--output {args.output}")
    for name, array in outputs.items():
        print(f"{name}: shape {tuple(array.shape)} {array.dtype}  sum {float(array.sum()):.6g}")
    return 0


