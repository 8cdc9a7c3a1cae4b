"""Careless invocations of the command line: one ``kuiper: error:`` line and a non-zero exit, never a traceback.

Usage errors (flags that contradict each other, an output name whose suffix is a format
kuiper does not write) exit 2; files and folders that cannot be used exit 1.  Nothing that
a user can type may end in "internal error, please report it".
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kuiper.cli import main

from conftest import MODELS

LINEAR = str(MODELS / "flatten_linear" / "model.pnnx.param")  # one input (1, 3, 4, 5), one output
TWO_OUT = str(MODELS / "two_in_two_out" / "model.pnnx.param")
HLO = "HloModule add\n\nENTRY main {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] add(x, x)\n}\n"
KERNEL = "A<4>[i] = B<4>[i] * 2.0;\n"
CASE = {"name": "double", "ins": ["B"], "outs": ["A"], "data_type": "float", "kernel": KERNEL, "grad_to": ["B"]}


@pytest.fixture
def files(tmp_path):
    """A working folder with a model input, an HLO module, a kernel, a case, a plain file and a binary file."""
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 4, 5), np.float32))
    np.save(tmp_path / "b.npy", np.arange(4, dtype=np.float32))
    (tmp_path / "m.hlo.txt").write_text(HLO)
    (tmp_path / "k.te").write_text(KERNEL)
    (tmp_path / "case.json").write_text(json.dumps(CASE))
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "binary.te").write_bytes(bytes(range(256)))
    return tmp_path


def run_cli(capsys, argv, tmp_path):
    argv = [a.format(model=LINEAR, two_out=TWO_OUT, tmp=tmp_path) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exits (usage errors)
        code = exc.code
    return code, capsys.readouterr()


def assert_one_error_line(err: str, message: str) -> None:
    assert err.startswith("kuiper: error: ") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err
    assert message in err, err




def _dask_array_missing() -> bool:
    try:
        return importlib.util.find_spec("dask.array") is None
    except ImportError:  # no dask at all
        return True


# `kuiper run --inputs` runs on dask.array (the test extra installs it; a bare GPU machine may not).
NEEDS_DASK = pytest.mark.skipif(_dask_array_missing(),
                                reason="kuiper run --inputs runs on Dask, which is not installed")

# The 7 that ended in "internal error, please report it", and more of their kind.
BAD_PATHS = [
    (["hlo", "dfg", "{tmp}/m.hlo.txt", "-o", "{tmp}/missing/g.json"], "the folder {tmp}/missing does not exist"),
    (["hlo", "dfg", "{tmp}/m.hlo.txt", "-o", "{tmp}/a_file/g.json"], "{tmp}/a_file is not a folder"),
    (["hlo", "dfg", "{tmp}/m.hlo.txt", "-o", "{tmp}"], "is a directory; give a file name"),
    (["te", "grad", "{tmp}/case.json", "-o", "{tmp}/missing/g.cc"], "the folder {tmp}/missing does not exist"),
    (["te", "grad", "{tmp}/case.json", "-o", "{tmp}/a_file/g.cc"], "{tmp}/a_file is not a folder"),
    (["te", "run", "{tmp}/k.te", "-i", "B={tmp}/b.npy", "-o", "{tmp}/missing/o.npz"],
     "the folder {tmp}/missing does not exist"),
    (["te", "run", "{tmp}/binary.te"], "binary.te: not a text file"),
    (["te", "run", "{tmp}/k.te", "-i", "B={tmp}/binary.te"], "not a .npy file or a .npz file"),
    pytest.param(["run", "{model}", "--inputs", "{tmp}/x.npy", "--output-dir", "{tmp}/a_file"],
                 "{tmp}/a_file is a file, not a folder", marks=NEEDS_DASK),
    pytest.param(["run", "{model}", "--inputs", "{tmp}/x.npy", "--output-dir", "{tmp}/a_file/out"],
                 "cannot make the folder", marks=NEEDS_DASK),
    (["run", "{model}", "-i", "{tmp}/binary.te"], "not a .npy file or a .npz file"),
    (["run", "{model}", "--random", "-o", "{tmp}/a_file/y.npy"], "{tmp}/a_file is not a folder"),
]


@pytest.mark.parametrize("argv, message", BAD_PATHS)
def test_an_unusable_file_or_folder_is_one_line_and_exit_1(files, capsys, argv, message):
    code, captured = run_cli(capsys, argv, files)
    assert code == 1
    assert_one_error_line(captured.err, message.format(tmp=files))


# The 13 that were silently accepted, and more of their kind.
CONFLICTS = [
    (["run", "{model}", "-i", "{tmp}/x.npy", "--random"], "--input and --random both give the inputs"),
    (["run", "{model}", "-i", "{tmp}/x.npy", "--batch", "4"], "--batch sets the batch of --random inputs"),
    (["run", "{model}"], "give them with --input FILE.npy"),
    (["run", "{model}", "--random", "-o", "{tmp}/y.txt"], "kuiper writes .npy or .npz here, not .txt"),
    (["run", "{model}", "--inputs", "{tmp}/x.npy", "--output-dir", "{tmp}/out", "--random"], "--random: for one run"),
    (["run", "{model}", "--inputs", "{tmp}/x.npy", "--output-dir", "{tmp}/out", "-o", "{tmp}/y.npy"],
     "--output: for one run"),
    (["run", "{model}", "--inputs", "{tmp}/x.npy", "--output-dir", "{tmp}/out", "-i", "{tmp}/x.npy"],
     "--input: for one run"),
    (["hlo", "dfg", "{tmp}/m.hlo.txt", "--dot", "-o", "{tmp}/g.png"], "not .png"),
    (["hlo", "dfg", "{tmp}/m.hlo.txt", "--json", "-o", "{tmp}/g.dot"], "--json and -o {tmp}/g.dot disagree"),
    (["hlo", "dfg", "{tmp}/m.hlo.txt", "--dot", "-o", "{tmp}/g.json"], "--dot and -o {tmp}/g.json disagree"),
    (["te", "run", "{tmp}/k.te", "-i", "B={tmp}/b.npy", "-o", "{tmp}/out.txt"], "name it FILE.npz"),
    (["te", "run", "{tmp}/k.te", "-i", "{tmp}/b.npy"], "name the tensor, NAME="),
    (["run", "{model}", "--random", "--threads", "0"], "expected a positive integer, found 0"),
    (["run", "{model}", "--random", "--backend", ""], "expected a backend name"),
    (["info", "{model}", "--backend", " "], "expected a backend name"),
    (["te", "run", "{tmp}/k.te", "-i", "B={tmp}/b.npy", "--backend", ""], "expected a backend name"),
    (["bench", "{model}", "--compare", "none", "--backend", ""], "expected a backend name"),
    (["demo", "--backend", ""], "expected a backend name"),
    (["run", "", "--random"], "MODEL: expected the path of a model file, found an empty string"),
    (["info", ""], "MODEL: expected the path of a model file, found an empty string"),
    (["bench", ""], "MODEL: expected the path of a model file, found an empty string"),
    (["run", "{model}", "--random", "-o", "-"], "arrays are not written to stdout"),
    (["run", "{two_out}", "--random", "-o", "{tmp}/y.npy"], "the model has 2 outputs; use a .npz file"),
    (["run", "{model}", "--inputs", "{tmp}/x.npy", "--output-dir", "{tmp}/out", "--threads", "2"],
     "--threads: for one run"),
]


@pytest.mark.parametrize("argv, message", CONFLICTS)
def test_contradictory_flags_are_a_usage_error_with_exit_2(files, capsys, argv, message):
    code, captured = run_cli(capsys, argv, files)
    assert code == 2
    assert_one_error_line(captured.err, message.format(tmp=files))
    assert not any(files.glob("g.*")) and not (files / "out").exists()  # nothing was written


def test_a_usage_error_points_to_the_subcommand_help(files, capsys):
    _, captured = run_cli(capsys, ["hlo", "dfg", "{tmp}/m.hlo.txt", "--dot", "-o", "{tmp}/g.png"], files)
    assert captured.err.rstrip().endswith("(see `kuiper hlo dfg --help`)")


def test_hlo_dfg_output_format_follows_the_suffix(files, capsys):
    assert main(["hlo", "dfg", str(files / "m.hlo.txt"), "-o", str(files / "g.gv")]) == 0
    assert (files / "g.gv").read_text().startswith("digraph hlo {")
    assert main(["hlo", "dfg", str(files / "m.hlo.txt"), "--dot", "-o", str(files / "g.dot")]) == 0
    assert (files / "g.dot").read_text().startswith("digraph hlo {")
    assert main(["hlo", "dfg", str(files / "m.hlo.txt"), "-o", str(files / "g.json")]) == 0
    assert {"nodes", "edges"} <= set(json.loads((files / "g.json").read_text()))


def test_dash_as_a_text_output_means_stdout(files, capsys):
    assert main(["hlo", "dfg", str(files / "m.hlo.txt"), "--dot", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("digraph hlo {")
    assert main(["te", "grad", str(files / "case.json"), "-l", "te", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("dB<4>[i] +=")
    assert not (files / "-").exists()


def test_te_run_writes_exactly_the_npz_named(files, capsys):
    out = files / "out.npz"
    assert main(["te", "run", str(files / "k.te"), "-i", f"B={files / 'b.npy'}", "-o", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["A"], 2.0 * np.arange(4))  # A = B * 2, by hand
    assert sorted(p.name for p in files.glob("out*")) == ["out.npz"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_an_unwritable_folder_is_refused_before_running(files, capsys):
    locked = files / "locked"
    locked.mkdir(mode=0o500)
    try:
        code, captured = run_cli(capsys, ["run", "{model}", "--random", "-o", f"{locked}/y.npy"], files)
        assert code == 1
        assert_one_error_line(captured.err, "permission denied")
        code, captured = run_cli(capsys, ["hlo", "dfg", "{tmp}/m.hlo.txt", "-o", f"{locked}/g.json"], files)
        assert code == 1
        assert_one_error_line(captured.err, "permission denied")
    finally:
        locked.chmod(0o700)


def test_an_unknown_backend_in_the_environment_is_not_shown_as_the_default(capsys, monkeypatch):
    monkeypatch.setenv("KUIPER_BACKEND", "nonsense")
    code, captured = run_cli(capsys, ["backends"], None)
    assert code == 1 and captured.out == ""
    assert_one_error_line(captured.err, "unknown backend 'nonsense' (from environment variable KUIPER_BACKEND)")


def test_an_unknown_key_in_kuiper_toml_names_the_file_and_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUIPER_BACKEND", raising=False)
    (tmp_path / "kuiper.toml").write_text('backnd = "cupy"\n')
    monkeypatch.chdir(tmp_path)
    code, captured = run_cli(capsys, ["backends"], tmp_path)
    assert code == 1
    assert_one_error_line(captured.err, f"{tmp_path / 'kuiper.toml'}: unknown key(s) 'backnd'; kuiper reads 'backend'")


@pytest.mark.parametrize("command", ["run", "info"])
def test_threads_option_reaches_the_model(capsys, monkeypatch, command):
    import kuiper

    real_load, loaded = kuiper.load, []

    def recording_load(*args, **kwargs):
        loaded.append(real_load(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr(kuiper, "load", recording_load)
    extra = ["--random"] if command == "run" else []
    assert main([command, LINEAR, "--threads", "3", *extra]) == 0
    assert main([command, LINEAR, *extra]) == 0
    assert [model.threads for model in loaded] == [3, None]


def test_the_command_shows_the_librarys_notes_on_stderr_while_it_runs(capsys):
    import logging

    from kuiper.cli import library_notes_on_stderr

    with library_notes_on_stderr():
        logging.getLogger("kuiper.graph.model").info("the first run is still going after %.0f s", 2.0)
        logging.getLogger("kuiper").debug("loaded something")  # DEBUG stays hidden
    logging.getLogger("kuiper.graph.model").info("after the command")  # the caller's logging again
    assert capsys.readouterr().err == "kuiper: the first run is still going after 2 s\n"


@pytest.mark.parametrize("variable", ["KUIPER_NUMBA", "KUIPER_DISABLE_PLUGIN_AUTOLOAD"])
def test_an_on_off_variable_that_is_neither_is_one_error_line(tmp_path, variable):
    # A fresh process: both are read once per process (the kernels' availability, the plugin manager).
    done = subprocess.run([sys.executable, "-m", "kuiper", "run", LINEAR, "--random"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, variable: "maybe"})
    assert done.returncode == 1
    assert_one_error_line(done.stderr, f"{variable}='maybe': expected 1 (or on, true, yes) or 0 (or off, false, no)")


def test_on_off_variables_read_the_usual_spellings(monkeypatch):
    from kuiper.config import switch_from_env
    from kuiper.errors import ConfigError

    for text, expected in [("1", True), ("ON", True), (" yes ", True), ("0", False), ("Off", False), ("no", False)]:
        monkeypatch.setenv("KUIPER_TEST_SWITCH", text)
        assert switch_from_env("KUIPER_TEST_SWITCH", default=not expected) is expected
    monkeypatch.setenv("KUIPER_TEST_SWITCH", "")
    assert switch_from_env("KUIPER_TEST_SWITCH", default=True) is True
    monkeypatch.setenv("KUIPER_TEST_SWITCH", "2")
    with pytest.raises(ConfigError, match="KUIPER_TEST_SWITCH='2'"):
        switch_from_env("KUIPER_TEST_SWITCH", default=True)


def test_version_comes_from_the_installed_metadata(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"kuiper {metadata.version('kuiper')}\n"


def test_the_package_version_is_the_installed_metadata():
    from importlib import metadata

    import kuiper

    assert kuiper.__version__ == metadata.version("kuiper")  # one version source: setup.cfg


def test_python_dash_m_kuiper_is_the_kuiper_command(tmp_path):
    # From another folder, so the checkout on sys.path is not what makes it work.
    done = subprocess.run([sys.executable, "-m", "kuiper", "run", LINEAR, "--random", "--batch", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "shape (2, 6) float32" in done.stdout
    usage = subprocess.run([sys.executable, "-m", "kuiper", "run", LINEAR, "--random", "-i", "x.npy"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and usage.stderr.startswith("kuiper: error: --input and --random")
