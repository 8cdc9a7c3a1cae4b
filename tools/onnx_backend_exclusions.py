"""Run ONNX's node conformance cases on kuiper and write the exclusion list with each failure's reason.

    python tools/onnx_backend_exclusions.py            # rewrite tests/onnx/node_exclusions.txt, print counts
    python tools/onnx_backend_exclusions.py --check    # print counts only

Each excluded case gets the reason kuiper itself gives (the op it cannot translate, the param it does
not support, or the first mismatch of a wrong result), so the list says why and shrinks as ops land.
tests/onnx/test_backend_suite.py runs every case and expects exactly the listed ones to fail.
"""

from __future__ import annotations

import argparse
import collections
import time
import unittest
import warnings
from pathlib import Path

import onnx.backend.test

import kuiper.onnx.backend as kuiper_backend

LIST = Path(__file__).resolve().parent.parent / "tests" / "onnx" / "node_exclusions.txt"
HEADER = """\
# ONNX node conformance cases (onnx.backend.test, kind "node") that kuiper does not pass, with the reason
# kuiper gives. Written by tools/onnx_backend_exclusions.py; tests/onnx/test_backend_suite.py expects
# exactly these cases to fail (a listed case that passes fails the suite: remove it from the list).
# case<TAB>reason
"""


def reason(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, AssertionError):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        detail = next((line for line in lines if line.startswith(("Mismatch", "ACTUAL", "x and y", "(shapes"))), "")
        return f"wrong result: {lines[0] if lines else ''} {detail}".strip()
    lines = text.splitlines()
    if "kuiper cannot run" in lines[0]:
        return "unsupported op: " + "; ".join(line.strip().split(" (used by")[0] for line in lines[1:])
    message = lines[0]
    for marker in ("): ", ">: "):  # drop the model and node prefix: the case name says which
        if marker in message:
            message = message.split(marker, 1)[1] if marker == ">: " else message.rsplit(marker, 1)[-1]
    return f"{type(error).__name__}: {message}"[:200]


# Why a case is excluded, coarsely: the types kuiper does not have, what inference does not do, then the rest.
CATEGORIES = (
    ("strings", ("strings", "StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch")),
    ("sequences", ("sequence_type", "ONNX sequences")),
    ("optionals", ("optional_type", "ONNX optionals")),
    ("training or randomness", ("training", "drops at random", "Random", "Bernoulli")),
    ("image decoding", ("ImageDecoder",)),
    ("ai.onnx.ml", ("ai.onnx.ml",)),
)


def category(why: str) -> str:
    for name, markers in CATEGORIES:
        if any(marker in why for marker in markers):
            return name
    if why.startswith("unsupported op"):
        return "op not translated yet"
    if why.startswith("wrong result"):
        return "wrong result"
    return "attribute, type or shape not supported"


def run_cases() -> tuple[list[str], dict[str, str]]:
    warnings.filterwarnings("ignore")
    runner = onnx.backend.test.BackendTest(kuiper_backend.KuiperBackend, __name__)
    passed, failed = [], {}
    for name, item in sorted(runner._test_items["NodeModel"].items()):  # noqa: SLF001 - the cases themselves
        if not name.endswith("_cpu"):
            continue
        case = name.removesuffix("_cpu")
        try:
            item.func(None)
            passed.append(case)
        except unittest.SkipTest:
            continue
        except Exception as error:  # noqa: BLE001 - every failure is recorded with its reason
            failed[case] = reason(error).replace("\t", " ").replace("\n", " ")
    return passed, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print the counts, leave the list alone")
    arguments = parser.parse_args()
    started = time.perf_counter()
    passed, failed = run_cases()
    total = len(passed) + len(failed)
    print(f"{len(passed)} of {total} node cases pass ({100 * len(passed) / total:.1f}%), {len(failed)} excluded, "
          f"{time.perf_counter() - started:.0f} s")
    for kind, count in collections.Counter(map(category, failed.values())).most_common():
        print(f"{count:5d}  {kind}")
    if not arguments.check:
        LIST.write_text(HEADER + "".join(f"{case}\t{why}\n" for case, why in sorted(failed.items())))
        print(f"wrote {LIST}")


if __name__ == "__main__":
    main()
