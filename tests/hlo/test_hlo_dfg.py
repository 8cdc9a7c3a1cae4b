"""The HLO data-flow graph: nodes, edges through called computations, JSON and DOT, the CLI."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from kuiper.cli import main
from kuiper.hlo import build_dfg, parse

MODULE = """HloModule m

body {
  t = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  v = f32[2] get-tuple-element(t), index=1
  ROOT out = (s32[], f32[2]) tuple(next, v)
}

cond {
  t = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  loop = (s32[], f32[2]) while(init), condition=cond, body=body
  y = f32[2] get-tuple-element(loop), index=1
  z = f32[] constant(0)
  ROOT r = f32[] reduce(y, z), dimensions={0}, to_apply=add
}
"""


def _edges(graph, kind):
    return {(e["source"], e["target"]) for e in graph.edges if e["kind"] == kind}


def test_nodes_and_edges_follow_called_computations():
    graph = build_dfg(parse(MODULE))
    assert len(graph.nodes) == 6 + 4 + 3 + 7
    node = next(n for n in graph.nodes if n["id"] == "main/loop")
    assert (node["opcode"], node["shape"], node["computation"]) == ("while", "(s32[], f32[2])", "main")
    assert ("main/zero", "main/init") in _edges(graph, "data")
    assert ("body/next", "body/out") in _edges(graph, "data")
    # The while's operand feeds both the body's and the condition's parameter; both roots flow back.
    assert {("main/init", "body/t"), ("main/init", "cond/t")} <= _edges(graph, "parameter")
    assert {("body/out", "main/loop"), ("cond/lt", "main/loop")} <= _edges(graph, "return")
    assert _edges(graph, "applies") == {("add/s", "main/r")}
    ids = {n["id"] for n in graph.nodes}
    assert all(e["source"] in ids and e["target"] in ids for e in graph.edges)


def test_json_and_dot_exports(tmp_path, capsys):
    path = tmp_path / "m.hlo.txt"
    path.write_text(MODULE)
    assert main(["hlo", "dfg", str(path), "--json", "-o", str(tmp_path / "g.json")]) == 0
    data = json.loads((tmp_path / "g.json").read_text())
    assert {"nodes", "edges"} <= data.keys() and {"id", "label"} <= data["nodes"][0].keys()
    assert {"source", "target"} <= data["edges"][0].keys()
    assert main(["hlo", "dfg", str(path), "--dot"]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith("digraph hlo {") and '"main/zero" -> "main/init";' in dot
    assert dot.count("subgraph cluster_") == 4


def test_cli_reports_a_syntax_error(tmp_path, capsys):
    path = tmp_path / "bad.hlo.txt"
    path.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[] negate(y)\n}\n")
    assert main(["hlo", "dfg", str(path)]) == 1
    assert "bad.hlo.txt:3:3" in capsys.readouterr().err


def test_kuiper_info_and_run_read_hlo_files(tmp_path, capsys):
    path = tmp_path / "m.hlo.txt"
    path.write_text(MODULE)
    assert main(["info", str(path)]) == 0
    info = capsys.readouterr().out
    assert " While " in info and " Reduce " in info
    np.save(tmp_path / "x.npy", np.float32([1.5, 2.0]))
    assert main(["run", str(path), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    assert np.load(tmp_path / "y.npy") == np.float32(3.5)  # the loop leaves x alone; reduce adds it up


def test_svg_output_goes_through_graphviz(tmp_path, monkeypatch):
    # A stand-in for Graphviz's dot: it records its arguments and the DOT text it was given.
    fake = tmp_path / "dot"
    fake.write_text(f"#!{sys.executable}\nimport sys\nopen(sys.argv[-1], 'w').write(' '.join(sys.argv[1:-1]) + "
                    "'\\n' + sys.stdin.read())\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    path = tmp_path / "m.hlo.txt"
    path.write_text(MODULE)
    assert main(["hlo", "dfg", str(path), "-o", str(tmp_path / "g.svg")]) == 0
    written = (tmp_path / "g.svg").read_text()
    assert written.startswith("-Tsvg -o\ndigraph hlo {")
