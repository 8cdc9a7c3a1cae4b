"""Start-up: what a fresh process imports to load and run a model, and that what is deferred still works.

Each test runs a fresh interpreter (an import made by an earlier test would hide a regression) and
reports ``sys.modules`` back as JSON; the model's outputs are compared with the fixture's saved
PyTorch / JAX references, so a deferred import that broke a path fails here.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from kuiper.backends import numpy_namespace

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
PNNX_CONV = FIXTURES / "models" / "conv2d_same"
HLO_MLP = FIXTURES / "hlo" / "mlp"
# The HLO reader: lexer, parser, verifier and translators.
HLO_READER = ("kuiper.hlo.lexer", "kuiper.hlo.parser", "kuiper.hlo.verify", "kuiper.hlo.lower", "kuiper.hlo.translators")


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it sets ``result`` (JSON-able), returned with the imported modules."""
    script = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps({'result': result, 'modules': sorted(sys.modules)}))\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_pnnx_model_loads_and_runs_without_importing_the_hlo_reader_or_array_api_compat():
    ran = _fresh(f"""
        import numpy as np
        import kuiper
        from kuiper.plugins import frontend_registry, plugin_manager
        reference = np.load({str(PNNX_CONV / "ref.npz")!r})
        model = kuiper.load({str(PNNX_CONV / "model.pnnx.param")!r})
        got = model(reference["b1_input0"], to_numpy=True)
        result = {{"error": float(np.max(np.abs(got - reference["b1_output0"]))),
                   "formats": sorted(frontend_registry()), "hlo_plugin": plugin_manager().has_plugin("hlo")}}
    """)
    assert ran["result"]["error"] < 1e-4
    assert ran["result"]["formats"] == ["hlo", "onnx", "pnnx"]  # still listed: only its reading code waits
    assert ran["result"]["hlo_plugin"]
    assert not set(HLO_READER) & set(ran["modules"])
    assert "onnx" not in ran["modules"] and "kuiper.onnx.reader" not in ran["modules"]  # read on first use
    if numpy_namespace.array_namespace() is numpy_namespace:  # NumPy 2.1 or later
        assert "array_api_compat" not in ran["modules"]


def test_the_hlo_frontend_reads_a_file_and_text_after_a_deferred_start():
    ran = _fresh(f"""
        import numpy as np
        import kuiper
        data = np.load({str(HLO_MLP) + ".npz"!r})
        path = {str(HLO_MLP) + ".hlo.txt"!r}
        from_file = kuiper.load(path)(data["input0"], to_numpy=True)
        from_text = kuiper.load(open(path).read())(data["input0"], to_numpy=True)
        result = [float(np.max(np.abs(out - data["output0"]))) for out in (from_file, from_text)]
    """)
    assert max(ran["result"]) < 1e-4
    assert set(HLO_READER) <= set(ran["modules"])


def test_registering_the_built_in_plugins_reads_no_lazily_imported_name():
    # pluggy before 1.7 calls getattr() on every name dir() lists while registering a plugin: a
    # plugin module with lazily imported names (PEP 562) would import them all, for every load.
    ran = _fresh("""
        import importlib
        from kuiper.plugins import BUILTIN_PLUGINS
        for module in BUILTIN_PLUGINS.values():
            plugin = importlib.import_module(module)
            for name in dir(plugin):
                getattr(plugin, name)
        result = None
    """)
    assert not set(HLO_READER) & set(ran["modules"])


def test_the_hlo_package_names_resolve_on_first_use():
    ran = _fresh("""
        import kuiper.hlo as hlo
        module = hlo.parse("HloModule m\\nENTRY e { ROOT p = f32[2] parameter(0) }")
        result = {"type": type(module).__name__, "is_module": isinstance(module, hlo.HloModule),
                  "dfg": type(hlo.build_dfg(module)).__name__, "listed": sorted(set(hlo.__all__) - set(dir(hlo)))}
        try:
            hlo.no_such_name
        except AttributeError as exc:
            result["missing"] = str(exc)
    """)
    assert ran["result"]["type"] == "HloModule" and ran["result"]["is_module"]
    assert ran["result"]["listed"] == []
    assert ran["result"]["missing"] == "module 'kuiper.hlo' has no attribute 'no_such_name'"


def test_a_conv_net_on_onednn_builds_and_runs_without_importing_numba_and_a_pooling_one_imports_it_when_run():
    ran = _fresh(f"""
        import sys
        import numpy as np
        import kuiper
        from kuiper import onednn
        result = {{"onednn": onednn.available()}}
        for name in ("conv2d_same", "layernorm_2d"):
            reference = np.load({str(FIXTURES / "models")!r} + "/" + name + "/ref.npz")
            model = kuiper.load({str(FIXTURES / "models")!r} + "/" + name + "/model.pnnx.param")
            built = "numba" in sys.modules
            got = model(reference["b1_input0"], to_numpy=True)
            result[name] = {{"after_build": built, "after_run": "numba" in sys.modules,
                             "error": float(np.max(np.abs(got - reference["b1_output0"])))}}
    """)
    result = ran["result"]
    assert result["conv2d_same"]["error"] < 1e-4 and result["layernorm_2d"]["error"] < 1e-4
    assert not result["conv2d_same"]["after_build"]
    if result["onednn"]:  # else the conv ran the compiled Winograd loops, which brought numba in
        assert not result["conv2d_same"]["after_run"]
        assert not result["layernorm_2d"]["after_build"]
    assert result["layernorm_2d"]["after_run"]  # its compiled row loop ran: numba came in then


def test_a_model_whose_only_elementwise_work_is_one_add_never_imports_numba():
    # ViT's position-embedding add over (1, 197, 192): NumPy runs one arithmetic step as fast as
    # the compiled interpreter, so numba (about 0.5 s and 100 MiB) is not imported for it.
    ran = _fresh("""
        import sys
        import numpy as np
        import kuiper
        text = ("7767517\\n4 3\\npnnx.Input in0 0 1 a\\npnnx.Input in1 0 1 b\\n"
                "pnnx.Expression add 2 1 a b c expr=add(@0,@1)\\npnnx.Output out 1 0 c\\n")
        import tempfile, pathlib
        folder = pathlib.Path(tempfile.mkdtemp())
        (folder / "m.pnnx.param").write_text(text)
        model = kuiper.load(folder / "m.pnnx.param")
        a, b = (np.random.default_rng(i).standard_normal((1, 197, 192)).astype(np.float32) for i in range(2))
        got = model(a, b, to_numpy=True)
        result = {"equal": bool(np.array_equal(got, a + b)), "numba": "numba" in sys.modules}
    """)
    assert ran["result"] == {"equal": True, "numba": False}
