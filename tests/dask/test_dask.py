"""kuiper.dask on a real LocalCluster: 2 worker processes on the loopback address, shared by this module."""

from __future__ import annotations

import os
import shutil
import signal

import numpy as np
import pytest

pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from conftest import model_dir, reference_batches, write_model

import kuiper
from kuiper.dask import load_counts, map_files, predict, resolve_model

TWO_OUT = model_dir("two_in_two_out") / "model.pnnx.param"  # two inputs, two outputs, declared batch 1
DYNAMIC = model_dir("reshape_batch_dynamic") / "model.pnnx.param"  # (?,3,4,5) -> (?,6)
CONV = model_dir("conv2d_stride2") / "model.pnnx.param"  # (1,3,9,11) -> (1,4,5,6)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as cluster, distributed.Client(cluster) as dask_client:
        yield dask_client


def private_copy(tmp_path, param_path):
    """The fixture model under a fresh path: a cache key no other test has loaded."""
    folder = tmp_path / "model"
    shutil.copytree(param_path.parent, folder)
    return folder / param_path.name


def chunkwise(model, arrays, rows):
    """Single-process reference: the same Model called on the same row chunks, outputs concatenated."""
    parts = [model(*[a[i:i + rows] for a in arrays], to_numpy=True) for i in range(0, len(arrays[0]), rows)]
    parts = [p if isinstance(p, tuple) else (p,) for p in parts]
    return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]


def test_predict_multi_output_matches_model_calls_and_pytorch(client):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 4, 6, 6)).astype("float32")
    y = rng.standard_normal((10, 4, 1, 1)).astype("float32")
    first, second = predict(TWO_OUT, (x, y), batch_size=3)  # chunks 3,3,3,1
    assert first.chunks[0] == (3, 3, 3, 1) and second.shape == (10, 4, 6, 6) and first.dtype == np.float32
    got = client.compute([first, second], sync=True)
    expected = chunkwise(kuiper.load(TWO_OUT), [x, y], 3)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)

    ref = reference_batches("two_in_two_out")["b3"]  # PyTorch's outputs, saved by tools/make_fixtures.py
    got = client.compute(list(predict(TWO_OUT, {"0": ref["inputs"][0], "1": ref["inputs"][1]}, batch_size=2)),
                         sync=True)
    for g, e in zip(got, ref["outputs"]):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_predict_dynamic_batch_declares_shapes_without_running(client, tmp_path):
    import dask.array as da

    path = private_copy(tmp_path, DYNAMIC)
    z = da.from_array(np.random.default_rng(1).standard_normal((7, 3, 4, 5)).astype("float32"), chunks=(4, 3, 4, 5))
    out = predict(path, z, batch_size=2)
    assert out.shape == (7, 6) and out.chunks == ((2, 2, 2, 1), (6,)) and out.dtype == np.float32
    # Shapes came from the declaration: no worker has loaded (let alone run) the model yet.
    assert all(spec.path != str(path) for counts in client.run(load_counts).values() for spec in counts)
    np.testing.assert_array_equal(out.compute(), chunkwise(kuiper.load(path), [z.compute()], 2)[0])


def test_a_free_output_dim_is_an_unknown_chunk_size(client):
    # Output dim 2 is batch + 3 (the fixture's expression), so equal chunks give equal blocks.
    path = model_dir("dynamic_interpolate_size") / "model.pnnx.param"  # (?,3,4,5) -> (?,3,?,5)
    z = np.random.default_rng(6).standard_normal((4, 3, 4, 5)).astype("float32")
    out = predict(path, z, batch_size=2)
    assert out.chunks[0] == (2, 2) and out.chunks[1] == (3,) and np.isnan(out.chunks[2][0]) and out.chunks[3] == (5,)
    got = out.compute()
    assert got.shape == (4, 3, 5, 5)
    np.testing.assert_array_equal(got, chunkwise(kuiper.load(path), [z], 2)[0])


def test_an_output_without_a_declared_shape_is_refused_up_front(tmp_path):
    path = write_model(tmp_path, "7767517\n3 2\npnnx.Input in0 0 1 x\nF.relu r 1 1 x y\npnnx.Output out0 1 0 y\n")
    with pytest.raises(kuiper.KuiperError, match="no declared batch dim"):
        predict(path, np.zeros((2, 3), "float32"))


def test_each_worker_loads_the_model_once(client, tmp_path):
    path = private_copy(tmp_path, DYNAMIC)
    z = np.random.default_rng(2).standard_normal((24, 3, 4, 5)).astype("float32")
    out = predict(path, z, batch_size=2)  # 12 chunks
    np.testing.assert_array_equal(out.compute(), chunkwise(kuiper.load(path), [z], 2)[0])
    loads = [count for counts in client.run(load_counts).values() for spec, count in counts.items()
             if spec.path == str(path)]
    assert loads and all(count == 1 for count in loads) and len(loads) <= 2


def test_rewritten_model_file_is_a_new_cache_key(tmp_path):
    path = private_copy(tmp_path, DYNAMIC)
    before, _ = resolve_model(path)
    os.utime(path, ns=(before.mtimes_ns[0] + 10**9, before.mtimes_ns[0] + 10**9))
    after, _ = resolve_model(path)
    assert before.backend == after.backend == "numpy" and before != after


def test_backend_is_resolved_on_the_client(monkeypatch):
    monkeypatch.setenv("KUIPER_BACKEND", "no-such-backend")
    with pytest.raises(kuiper.BackendUnavailableError, match="no-such-backend"):
        resolve_model(DYNAMIC)
    monkeypatch.delenv("KUIPER_BACKEND")
    spec, _ = resolve_model(DYNAMIC)
    assert spec.backend == "numpy"  # workers get the name, never their own environment's choice


def test_built_model_travels_as_its_path(client):
    model = kuiper.load(DYNAMIC)
    z = np.random.default_rng(3).standard_normal((5, 3, 4, 5)).astype("float32")
    np.testing.assert_array_equal(predict(model, z, batch_size=5).compute(), model(z, to_numpy=True))


def test_model_without_origin_is_refused():
    import dataclasses

    in_memory = dataclasses.replace(kuiper.load(DYNAMIC), origin=None)
    with pytest.raises(kuiper.KuiperError, match="in-memory graph"):
        predict(in_memory, np.zeros((1, 3, 4, 5), "float32"))


class NoSubmitClient:
    def submit(self, *args, **kwargs):
        raise AssertionError("a task was submitted")

    def scheduler_info(self):
        return {"workers": {}}


def test_unloadable_model_fails_on_the_client_before_any_task(tmp_path):
    broken = tmp_path / "broken.pnnx.param"
    broken.write_text("7767517\n1 1\nnn.NoSuchOp op 0 1 x\n")
    np.save(tmp_path / "a.npy", np.zeros((1, 3, 4, 5), "float32"))
    with pytest.raises(kuiper.KuiperError):
        map_files(broken, [tmp_path / "a.npy"], tmp_path / "out", client=NoSubmitClient())
    with pytest.raises(kuiper.KuiperError, match="not found"):
        predict(tmp_path / "missing.pnnx.param", np.zeros((1, 3, 4, 5), "float32"))


def test_wrong_input_shape_is_rejected_on_the_client():
    with pytest.raises(kuiper.ShapeError, match="dim 0 and '.' dims may vary"):
        predict(DYNAMIC, np.zeros((4, 3, 4, 6), "float32"))


def write_inputs(folder, count, rows=3, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        paths.append(folder / f"item{i:02d}.npy")
        np.save(paths[-1], rng.standard_normal((rows + i % 3, 3, 4, 5)).astype("float32"))
    return paths


def test_map_files_reports_bad_items_by_name_and_completes_the_rest(client, tmp_path):
    paths = write_inputs(tmp_path / "in", 4)
    (tmp_path / "in" / "corrupt.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    np.save(tmp_path / "in" / "wrong.npy", np.zeros((2, 3, 4, 6), "float32"))
    summary = map_files(DYNAMIC, sorted((tmp_path / "in").iterdir()), tmp_path / "out", batch_size=2)
    failures = {item.name: item.error for item in summary.failures}
    assert set(failures) == {"corrupt.npy", "wrong.npy"}
    assert "cannot read" in failures["corrupt.npy"] and "dim 3 must be 5" in failures["wrong.npy"]
    assert summary.count("written") == 4
    model = kuiper.load(DYNAMIC)
    for path in paths:  # batch_size=2: each file ran in 2-row batches
        np.testing.assert_array_equal(np.load(tmp_path / "out" / path.name), chunkwise(model, [np.load(path)], 2)[0])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [p.name for p in paths]  # no temporaries


def test_map_files_multi_output_npz_and_resume(client, tmp_path):
    rng = np.random.default_rng(4)
    for i in range(3):
        np.savez(tmp_path / f"f{i}.npz", **{"0": rng.standard_normal((2, 4, 6, 6)).astype("float32"),
                                            "1": rng.standard_normal((2, 4, 1, 1)).astype("float32")})
    inputs = sorted(tmp_path.glob("*.npz"))
    first = map_files(TWO_OUT, inputs, tmp_path / "out")
    assert first.count("written") == 3
    model = kuiper.load(TWO_OUT)
    for path in inputs:
        with np.load(path) as feeds, np.load(tmp_path / "out" / path.name) as got:
            expected = model.run(dict(feeds), to_numpy=True)
            assert sorted(got.files) == sorted(expected)
            for name in expected:
                np.testing.assert_array_equal(got[name], expected[name])

    (tmp_path / "out" / "f1.npz").unlink()
    statuses = {}
    again = map_files(TWO_OUT, inputs, tmp_path / "out", on_result=lambda item: statuses.update({item.name: item.status}))
    assert statuses == {"f0.npz": "skipped", "f1.npz": "written", "f2.npz": "skipped"}
    assert again.count("skipped") == 2 and not again.failures


def test_a_worker_killed_mid_run_is_retried_and_every_output_is_correct(client, tmp_path):
    rng = np.random.default_rng(5)
    (tmp_path / "in").mkdir()
    paths = []
    for i in range(16):
        paths.append(tmp_path / "in" / f"img{i:02d}.npy")
        np.save(paths[-1], rng.standard_normal((400, 3, 9, 11)).astype("float32"))
    killed = {}

    def kill_a_busy_worker(item):
        if killed:
            return
        busy = [address for address, keys in client.processing().items() if keys]
        if busy:
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
            killed.update(address=busy[0], pid=pid, keys=set(client.processing()[busy[0]]))
            os.kill(pid, signal.SIGKILL)

    summary = map_files(CONV, paths, tmp_path / "out", on_result=kill_a_busy_worker)
    assert killed, "no worker was busy when the first item finished"
    assert not summary.failures and summary.count("written") == len(paths)
    model = kuiper.load(CONV)
    for path in paths:
        np.testing.assert_array_equal(np.load(tmp_path / "out" / path.name), model(np.load(path), to_numpy=True))
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker for the tests after this one
    assert killed["pid"] not in client.run(os.getpid).values()


def test_cli_run_over_a_folder(client, tmp_path, capsys):
    from kuiper.cli import main

    paths = write_inputs(tmp_path / "in", 3)
    (tmp_path / "in" / "bad.npy").write_bytes(b"not numpy")
    code = main(["run", str(DYNAMIC), "--inputs", str(tmp_path / "in" / "*.npy"), "--output-dir",
                 str(tmp_path / "out"), "--batch-size", "2"])
    captured = capsys.readouterr()
    assert code == 1
    assert "FAILED bad.npy:" in captured.err and "not a .npy file" in captured.err
    assert "4 item(s): 3 written, 0 skipped (already done), 1 failed" in captured.out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [p.name for p in paths]

    (tmp_path / "in" / "bad.npy").unlink()
    (tmp_path / "out" / "item01.npy").unlink()
    assert main(["run", str(DYNAMIC), "--inputs", str(tmp_path / "in" / "*.npy"), "--output-dir",
                 str(tmp_path / "out"), "--scheduler", client.scheduler.address]) == 0
    assert "3 item(s): 1 written, 2 skipped" in capsys.readouterr().out
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "item01.npy"),
                                  kuiper.load(DYNAMIC)(np.load(paths[1]), to_numpy=True))


def test_cli_reports_an_unloadable_model_and_bad_options(tmp_path, capsys):
    from kuiper.cli import main

    np.save(tmp_path / "a.npy", np.zeros((1, 3, 4, 5), "float32"))
    assert main(["run", str(tmp_path / "nope.pnnx.param"), "--inputs", str(tmp_path / "a.npy"),
                 "--output-dir", str(tmp_path / "out")]) == 1
    assert "model file not found" in capsys.readouterr().err
    assert main(["run", str(DYNAMIC), "--inputs", str(tmp_path / "*.nothing"), "--output-dir", "o"]) == 1
    assert "no file matches" in capsys.readouterr().err
    assert main(["run", str(DYNAMIC), "--output-dir", str(tmp_path / "out")]) == 2  # a usage error (issue 11: exit 2)
    assert "--output-dir" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(DYNAMIC), "--inputs", "x", "--output-dir", "o", "--workers", "2", "--scheduler", "tcp://a:1"])


def test_the_embedded_cluster_sets_the_blas_thread_count_and_keeps_glibcs_malloc_defaults(monkeypatch):
    # The default is one BLAS thread per worker; 2 here shows the setting (not Dask's default of 1) arrives,
    # even over the values an earlier cluster leaves in this process's environment (Dask's nanny does).
    from kuiper.dask import local_cluster

    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")
    # Dask's own default, which an earlier plain cluster leaves here; it makes every activation a fresh mmap.
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")

    def blas_environment():
        return {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}

    def trim_threshold():
        return os.environ.get("MALLOC_TRIM_THRESHOLD_")

    with local_cluster(workers=1, blas_threads=2, dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as other:
        assert list(other.run(blas_environment).values()) == [dict.fromkeys(blas_environment(), "2")]
        assert list(other.run(trim_threshold).values()) == [None]  # glibc's defaults in the worker
    assert trim_threshold() == "65536"  # this process's environment is given back
