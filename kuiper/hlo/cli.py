"""``kuiper hlo dfg FILE [--json|--dot] [-o OUT]``: write an HLO module's data-flow graph."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import KuiperError
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
    dfg.add_argument("-o", "--output", help="write here instead of stdout (.svg: rendered with `dot -Tsvg`)")
    dfg.set_defaults(func=cmd_hlo_dfg)


def cmd_hlo_dfg(args) -> int:
    graph = build_dfg(read_module(args.file))
    output = Path(args.output) if args.output else None
    if output is not None and output.suffix == ".svg":
        dot = shutil.which("dot")
        if dot is None:
            raise KuiperError("rendering SVG needs Graphviz's `dot` on PATH; use --dot -o FILE.dot instead")
        try:
            subprocess.run([dot, "-Tsvg", "-o", str(output)], input=graph.to_dot(), text=True, check=True,
                           capture_output=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or exc
            raise KuiperError(f"Graphviz's dot could not render {output}: {detail}") from None
        return 0
    text = graph.to_dot() if args.dot else graph.to_json()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
    return 0
