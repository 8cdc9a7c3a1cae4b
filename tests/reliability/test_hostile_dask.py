"""Array files and Dask batch runs under hostile input: sizes checked from headers before anything
is allocated or inflated, one bad item fails that item only, symlinks named after themselves."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest
from conftest import model_dir

from kuiper.cli import main
from kuiper.errors import InputError, SizeLimitError
from kuiper.user_files import read_arrays

DYNAMIC = model_dir("reshape_batch_dynamic") / "model.pnnx.param"  # (?,3,4,5) -> (?,6)


def _npy_header_only(path, shape, descr="<f4", data=b"\0" * 64):
    with open(path, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {"descr": descr, "fortran_order": False, "shape": shape})
        handle.write(data)


def _npz_bomb(path, elements: int):
    """A small .npz whose one member inflates to ``elements`` float32 zeros."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array(member, np.zeros(elements, np.float32))


def test_a_header_declaring_15_tib_is_refused_by_name(tmp_path):
    _npy_header_only(tmp_path / "huge.npy", (4 * 2**40,))
    assert (tmp_path / "huge.npy").stat().st_size < 200
    with pytest.raises(SizeLimitError, match=r"huge.npy: a tensor of shape \(4398046511104,\) needs 16 TiB"):
        read_arrays(tmp_path / "huge.npy", str(tmp_path / "huge.npy"))


def test_a_header_declaring_more_than_the_file_holds_is_refused(tmp_path):
    _npy_header_only(tmp_path / "short.npy", (1000,))
    with pytest.raises(InputError, match="declares shape \\(1000,\\) of float32 \\(4000 bytes\\), but the file holds 64"):
        read_arrays(tmp_path / "short.npy", "short.npy")


@pytest.mark.parametrize("command", [["run", str(DYNAMIC)], ["te", "run", "KERNEL"]])
def test_the_command_line_gives_one_line_for_a_huge_header(tmp_path, capsys, command):
    _npy_header_only(tmp_path / "huge.npy", (4 * 2**40,))
    (tmp_path / "k.te").write_text("A<2>[i] = x<2>[i];")
    command = [str(tmp_path / "k.te") if part == "KERNEL" else part for part in command]
    assert main([*command, "-i", f"x={tmp_path / 'huge.npy'}"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "huge.npy" in error and "16 TiB" in error


def test_an_npz_member_that_inflates_past_the_budget_is_refused_before_inflating(tmp_path, monkeypatch):
    _npz_bomb(tmp_path / "bomb.npz", 20_000_000)  # 80 MB of zeros in about 80 KB
    assert (tmp_path / "bomb.npz").stat().st_size < 1_000_000
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "16MiB")
    with pytest.raises(SizeLimitError, match="bomb.npz: member x.npy: a tensor of shape \\(20000000,\\)"):
        read_arrays(tmp_path / "bomb.npz", str(tmp_path / "bomb.npz"))


def test_npz_members_together_over_the_budget_are_refused(tmp_path, monkeypatch):
    np.savez(tmp_path / "many.npz", **{f"a{i}": np.zeros(1_000_000, np.float32) for i in range(5)})
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "16MiB")  # each member fits, all five do not
    with pytest.raises(SizeLimitError, match="many.npz: its arrays declare 20000000 bytes together"):
        read_arrays(tmp_path / "many.npz", str(tmp_path / "many.npz"))


def test_valid_files_still_read(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(6.0).reshape(2, 3))
    np.savez_compressed(tmp_path / "b.npz", x=np.arange(3), y=np.eye(2))
    np.testing.assert_array_equal(read_arrays(tmp_path / "a.npy", "a"), np.arange(6.0).reshape(2, 3))
    data = read_arrays(tmp_path / "b.npz", "b")
    np.testing.assert_array_equal(data["x"], np.arange(3))
    np.testing.assert_array_equal(data["y"], np.eye(2))


# --- Dask batch runs ------------------------------------------------------------------------------

distributed = pytest.importorskip("distributed")
pytest.importorskip("dask.array")

from kuiper.dask import files as dask_files  # noqa: E402 - only with Dask installed
from kuiper.dask import map_files  # noqa: E402


@pytest.fixture(scope="module")
def client():
    # Threads in this process: the tests' environment (the memory budget) and patches reach the workers.
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as dask_client:
        yield dask_client


def _item(rows=2, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, 3, 4, 5)).astype(np.float32)


def test_an_npz_bomb_fails_its_item_fast_and_the_rest_complete(client, tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "16MiB")
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "good.npy", _item())
    _npz_bomb(tmp_path / "in" / "bomb.npz", 20_000_000)
    summary = map_files(DYNAMIC, sorted((tmp_path / "in").iterdir()), tmp_path / "out", client=client)
    failures = {item.name: item.error for item in summary.failures}
    assert list(failures) == ["bomb.npz"] and "member x.npy" in failures["bomb.npz"]
    assert summary.count("written") == 1


def test_symlinks_are_named_after_themselves_and_a_bad_one_fails_alone(client, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "real.npy", _item())
    (data / "notes.txt").write_text("not an array")
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(data / "real.npy", links / "first.npy")
    os.symlink(data / "real.npy", links / "second.npy")
    os.symlink(data / "notes.txt", links / "broken.npy")
    os.symlink(data / "real.npy", links / "wrong_suffix.dat")
    summary = map_files(DYNAMIC, sorted(links.iterdir()), tmp_path / "out", client=client)
    failures = {item.name: item.error for item in summary.failures}
    assert set(failures) == {"broken.npy", "wrong_suffix.dat"}
    assert "broken.npy" in failures["broken.npy"] and "not a .npy file" in failures["broken.npy"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["first.npy", "second.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "first.npy"), np.load(tmp_path / "out" / "second.npy"))


def test_an_os_error_during_an_item_is_reported_by_file(client, tmp_path, monkeypatch):
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "a.npy", _item())
    np.save(tmp_path / "in" / "b.npy", _item(seed=1))
    real_read = dask_files.read_arrays

    def flaky(path, what):
        if str(path).endswith("b.npy"):
            raise OSError(5, "Input/output error")
        return real_read(path, what)

    monkeypatch.setattr(dask_files, "read_arrays", flaky)
    summary = map_files(DYNAMIC, sorted((tmp_path / "in").iterdir()), tmp_path / "out", client=client)
    failures = {item.name: item.error for item in summary.failures}
    assert list(failures) == ["b.npy"]
    assert failures["b.npy"].endswith("b.npy: Input/output error")
    assert summary.count("written") == 1
