"""The kuiper command line, called in-process through kuiper.cli.main."""

import numpy as np
import pytest

from kuiper.cli import main

from conftest import MODELS, reference_batches

LINEAR = MODELS / "flatten_linear" / "model.pnnx.param"


def test_demo_reports_accuracy_and_agreement_with_pytorch(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    accuracy = float(out.split("accuracy on held-out digits: ")[1].split("%")[0])
    agreement = float(out.split("agreement with PyTorch predictions: ")[1].split("%")[0])
    assert accuracy > 90.0
    assert agreement == 100.0


def test_run_reads_npy_and_writes_npy_matching_pytorch(tmp_path, capsys):
    data = reference_batches("flatten_linear")["b3"]
    np.save(tmp_path / "x.npy", data["inputs"][0])
    assert main(["run", str(LINEAR), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), data["outputs"][0], atol=1e-4)
    assert "ran on backend 'numpy'" in capsys.readouterr().out


def test_run_feeds_an_npz_by_input_name_and_saves_npz(tmp_path):
    data = reference_batches("two_in_two_out")["b1"]
    import kuiper

    model = kuiper.load(MODELS / "two_in_two_out" / "model.pnnx.param")
    np.savez(tmp_path / "in.npz", **{spec.name: array for spec, array in zip(model.inputs, data["inputs"])})
    param = str(MODELS / "two_in_two_out" / "model.pnnx.param")
    assert main(["run", param, "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")]) == 0
    saved = np.load(tmp_path / "out.npz")
    for spec, want in zip(model.outputs, data["outputs"]):
        np.testing.assert_allclose(saved[spec.name], want, atol=1e-4)


def test_run_with_random_inputs(capsys):
    assert main(["run", str(LINEAR), "--random", "--batch", "2"]) == 0
    assert "shape (2, 6) float32" in capsys.readouterr().out


@pytest.mark.parametrize("flags", [["--workers", "-1"], ["--scheduler", "tcp://a:1"], ["--batch-size", "4"]])
def test_cluster_options_without_inputs_are_a_usage_error(capsys, flags):
    model = str(MODELS / "conv2d_depthwise" / "model.pnnx.param")
    assert main(["run", model, "--random", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kuiper: error:") and flags[0] in err and "--inputs" in err


def test_errors_are_one_line_and_exit_1(tmp_path, capsys):
    np.save(tmp_path / "bad.npy", np.zeros((1, 2), np.float32))
    assert main(["run", str(LINEAR), "-i", str(tmp_path / "bad.npy")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kuiper: error: ") and "expects rank" in err
    assert main(["info", str(tmp_path / "missing.pnnx.param")]) == 1
    assert "model file not found" in capsys.readouterr().err


def test_unreadable_input_file_is_reported(tmp_path, capsys):
    (tmp_path / "x.npy").write_text("not numpy")
    assert main(["run", str(LINEAR), "-i", str(tmp_path / "x.npy")]) == 1
    assert "not a .npy file or a .npz file (it starts with b'not nu')" in capsys.readouterr().err


def test_info_lists_ops_with_shapes_and_parameters(capsys):
    assert main(["info", str(MODELS / "resnet18_w8" / "model.pnnx.param")]) == 0
    out = capsys.readouterr().out
    assert "inputs:  0: (?, 3, 64, 64) float32" in out
    assert "Conv2d" in out and "parameters:" in out
    # the convs run as one provider's partition: its members are listed under it, indented
    assert "\n  convbn2d_1         Conv2d" in out and "\n  maxpool            MaxPool2d" in out


def test_info_names_the_runs_execution_providers_claimed(capsys):
    assert main(["info", str(MODELS / "transformer_encoder" / "model.pnnx.param")]) == 0
    out = capsys.readouterr().out
    assert "2 run(s) of ops claimed by execution providers" in out  # each layer's MLP as one dense chain
    assert "  dense-chain: post_norm.linear1 + post_norm.linear2 (2 ops)" in out


def test_backends_lists_numpy_and_explains_cupy(capsys):
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "default backend: numpy" in out or "default backend:" in out
    assert "numpy" in out and "cupy" in out


def test_ops_lists_types_with_their_plugin(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "nn.Conv2d" in out and "[builtin_ops]" in out
    assert "example.layers.ScaledTanh" in out and "[scaled_tanh]" in out


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage: kuiper" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "info", "backends", "ops", "demo"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: kuiper " + command in capsys.readouterr().out


def test_demo_files_are_shipped_as_package_data():
    # A plain `pip install .` must carry the demo model: kuiper.demo has to be a package
    # found by setup.cfg's find: rule, and its package_data patterns must match the files.
    import configparser
    import fnmatch
    from pathlib import Path

    from setuptools import find_packages

    root = Path(__file__).resolve().parents[2]
    assert "kuiper.demo" in find_packages(str(root), include=["kuiper", "kuiper.*"])
    config = configparser.ConfigParser()
    config.read(root / "setup.cfg")
    patterns = [p.strip() for p in config["options.package_data"]["kuiper.demo"].split(",")]
    for name in ("digits.pnnx.param", "digits.pnnx.bin", "digits_heldout.npz"):
        assert (root / "kuiper" / "demo" / name).exists()
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def test_info_on_a_model_with_unsupported_ops_shows_the_table_and_marks_them(tmp_path, capsys):
    from conftest import write_model

    text = (
        "7767517\n4 3\n"
        "pnnx.Input in0 0 1 x #x=(1,3)f32\n"
        "nn.Frobnicate f 1 1 x a #a=(1,3)f32\n"
        "nn.ReLU r 1 1 a b\n"
        "pnnx.Output out 1 0 b\n"
    )
    assert main(["info", str(write_model(tmp_path, text))]) == 1
    captured = capsys.readouterr()
    frob_row = next(line for line in captured.out.splitlines() if line.startswith("f "))
    relu_row = next(line for line in captured.out.splitlines() if line.startswith("r "))
    assert "nn.Frobnicate" in frob_row and frob_row.endswith("UNSUPPORTED")
    assert "UNSUPPORTED" not in relu_row
    assert "nn.Frobnicate: used by f" in captured.err


def test_a_closed_pipe_is_not_an_error():
    """`kuiper ops | head -1`: the reader goes away; kuiper exits quietly with 0."""
    import subprocess
    import sys

    code = "import sys; from kuiper.cli import main; sys.exit(main(['ops']))"
    result = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -c "{code}" | head -1; exit ${{PIPESTATUS[0]}}'],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.endswith("op types:\n")
