"""kuiper's ONNX frontend: ``.onnx`` files, ``onnx.ModelProto`` objects and their bytes, translated into the
canonical op set (one table per op family, ``translate_*.py``), and ``kuiper.onnx.backend``, the
``onnx.backend.base.Backend`` that ONNX's own conformance suite drives.

The ``onnx`` package is needed only here (``pip install "kuiper[onnx]"``); plugin discovery imports
``plugin.py``, which imports onnx only when a model is read.
"""
