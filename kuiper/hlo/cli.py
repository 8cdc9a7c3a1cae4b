"""``kuiper hlo dfg FILE [--json|--dot] [-o OUT]``: write an HLO module's data-flow graph."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import KuiperError, UsageError
from ..user_files import check_output_file, text_output_argument, write_text
from .dfg import build_dfg
from .files import read_module


def add_hlo_command(subparsers) -> None:
    hlo = subparsers.add_parser("hlo", help="work with XLA HLO text (as JAX or TensorFlow dump it)")
    hlo_sub = hlo.add_subparsers(dest="hlo_command", metavar="HLO_COMMAND", required=True)
    dfg = hlo_sub.add_parser(
        "dfg",
        help="write the data-flow graph as JSON or Graphviz DOT (an .svg OUT is rendered with Graphviz's dot)",
    )
    dfg.add_argument("file", help="HLO text file (.hlo.txt)")
    form = dfg.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="JSON: {nodes, edges, computations} (the default)")
    form.add_argument("--dot", action="store_true", help="Graphviz DOT")
    dfg.add_argument("-o", "--output", type=text_output_argument,
                     help="write here instead of stdout (.svg: rendered with `dot -Tsvg`; -: stdout)")
    dfg.set_defaults(func=cmd_hlo_dfg)


# What an output file's suffix says it holds; a file without a suffix gets what --json/--dot ask for.
_FORMAT_OF_SUFFIX = {".json": "json", ".dot": "dot", ".gv": "dot", ".svg": "svg"}


def output_format(args) -> str:
    """json, dot or svg, from --json/--dot and the output's suffix; a usage error when they disagree."""
    asked = "dot" if args.dot else "json" if args.json else None
    if not args.output:
        return asked or "json"
    suffix = Path(args.output).suffix.lower()
    if suffix and suffix not in _FORMAT_OF_SUFFIX:
        raise UsageError(f"-o {args.output}: kuiper writes .json, .dot, .gv or .svg (rendered by Graphviz), "
                         f"not {suffix}; for other images run Graphviz's dot on a .dot file")
    implied = _FORMAT_OF_SUFFIX.get(suffix)
    if asked and implied and not (asked == implied or (asked, implied) == ("dot", "svg")):
        raise UsageError(f"--{asked} and -o {args.output} disagree: a {suffix} file holds {implied.upper()}")
    return implied or asked or "json"


def cmd_hlo_dfg(args) -> int:
    form = output_format(args)
    if args.output:
        check_output_file(args.output, f"-o {args.output}")
    graph = build_dfg(read_module(args.file))
    if form == "svg":
        dot = shutil.which("dot")
        if dot is None:
            raise KuiperError("rendering SVG needs Graphviz's `dot` on PATH; use --dot -o FILE.dot instead")
        try:
            subprocess.run([dot, "-Tsvg", "-o", args.output], input=graph.to_dot(), text=True, check=True,
                           capture_output=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or exc
            raise KuiperError(f"Graphviz's dot could not render {args.output}: {detail}") from None
        return 0
    text = graph.to_dot() if form == "dot" else graph.to_json()
    if args.output:
        write_text(args.output, text, f"-o {args.output}")
    else:
        sys.stdout.write(text)
    return 0
