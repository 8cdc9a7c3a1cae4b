"""kuiper.user_files: the one .npy/.npz reader and output writer of the CLI and kuiper.dask."""

import os

import numpy as np
import pytest

from kuiper.errors import InputError, UsageError
from kuiper.user_files import (
    check_output_file,
    count_rows,
    prepare_output_dir,
    read_arrays,
    read_feeds,
    write_arrays,
    write_text,
)


def test_reads_a_npy_and_every_member_of_a_npz(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "both.npz", a=x, b=x.T.astype(np.int64))
    np.testing.assert_array_equal(read_arrays(tmp_path / "x.npy", "x"), x)
    both = read_arrays(tmp_path / "both.npz", "both")
    assert sorted(both) == ["a", "b"] and both["b"].dtype == np.int64
    np.testing.assert_array_equal(both["b"], x.T)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "not a .npy file or a .npz file (it starts with b'')"),
        (b"col1,col2\n1,2\n", "not a .npy file or a .npz file (it starts with b'col1,c')"),
        (b"\x93NUMPY\x01\x00garbage", "cannot read a .npy/.npz file"),
        (b"PK\x03\x04 truncated zip", "cannot read a .npy/.npz file"),
    ],
)
def test_a_file_that_is_not_numpy_is_named_with_what_it_starts_with(tmp_path, content, message):
    (tmp_path / "f.npy").write_bytes(content)
    with pytest.raises(InputError, match="^--input f.npy: ") as info:
        read_arrays(tmp_path / "f.npy", "--input f.npy")
    assert message in str(info.value)


def test_pickled_object_arrays_are_refused_not_unpickled(tmp_path):
    np.save(tmp_path / "o.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="Object arrays cannot be loaded"):
        read_arrays(tmp_path / "o.npy", "o")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.npy")
    with pytest.raises(InputError, match="is a FIFO; expected a regular file"):
        read_arrays(tmp_path / "pipe.npy", "pipe")


def test_count_rows_reads_dim_0_and_gives_0_for_a_broken_file(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((7, 2)))
    np.savez(tmp_path / "x.npz", first=np.zeros((5, 1)))
    (tmp_path / "bad.npy").write_bytes(b"junk")
    assert [count_rows(tmp_path / n) for n in ("x.npy", "x.npz", "bad.npy")] == [7, 5, 0]


def test_write_is_atomic_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "x.npy"
    write_arrays(target, {"y": np.arange(3.0)}, "x")
    with pytest.raises(ValueError):  # object arrays cannot be saved without pickle: fails mid-write
        write_arrays(target, {"y": np.array([object()])}, "x")
    np.testing.assert_array_equal(np.load(target), np.arange(3.0))
    assert [p.name for p in tmp_path.iterdir()] == ["x.npy"]


def test_writes_exactly_the_name_given(tmp_path):
    write_arrays(tmp_path / "result", {"y": np.ones(2)}, "r")
    write_arrays(tmp_path / "all.npz", {"y": np.ones(2), "z": np.zeros(1)}, "a")
    write_arrays(tmp_path / "UPPER.NPZ", {"y": np.ones(2)}, "u")  # a .npz in any case, not .npy bytes
    write_text(tmp_path / "g.dot", "digraph {}\n", "g")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["UPPER.NPZ", "all.npz", "g.dot", "result"]
    assert np.load(tmp_path / "UPPER.NPZ").files == ["y"]
    assert sorted(np.load(tmp_path / "all.npz").files) == ["y", "z"]
    np.testing.assert_array_equal(np.load(tmp_path / "result"), np.ones(2))


def test_output_checks_name_the_problem(tmp_path):
    (tmp_path / "plain").write_text("")
    with pytest.raises(InputError, match="the folder .*missing does not exist"):
        check_output_file(tmp_path / "missing" / "y.npy", "-o")
    with pytest.raises(InputError, match="plain is not a folder"):
        check_output_file(tmp_path / "plain" / "y.npy", "-o")
    with pytest.raises(InputError, match="is a directory"):
        check_output_file(tmp_path, "-o")
    with pytest.raises(UsageError, match="kuiper writes .npy or .npz here, not .png"):
        check_output_file(tmp_path / "y.png", "-o", (".npy", ".npz", ""))
    assert check_output_file(tmp_path / "y", "-o", (".npy", ".npz", "")) == tmp_path / "y"
    with pytest.raises(UsageError, match="not a name without a suffix"):
        check_output_file(tmp_path / "y", "-o", (".npz",))


def test_output_dir_is_made_with_its_parents_and_a_file_is_refused(tmp_path):
    assert prepare_output_dir(tmp_path / "a" / "b", "--output-dir").is_dir()
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="is a file, not a folder"):
        prepare_output_dir(tmp_path / "f", "--output-dir")


def test_feeds_from_input_specs_by_position_name_and_npz(tmp_path):
    a, b = np.arange(3, dtype=np.float32), np.ones((2, 2), np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.savez(tmp_path / "both.npz", x=a, y=b)
    by_position = read_feeds([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], ["x", "y"])
    assert list(by_position) == ["x", "y"] and np.array_equal(by_position["y"], b)
    assert list(read_feeds([f"y={tmp_path / 'a.npy'}"], ["x", "y"])) == ["y"]
    assert sorted(read_feeds([str(tmp_path / "both.npz")])) == ["x", "y"]
    with pytest.raises(InputError, match="only 1 input"):
        read_feeds([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], ["x"])
    with pytest.raises(UsageError, match="name the tensor"):
        read_feeds([str(tmp_path / "a.npy")])  # no positional order (te kernels)
