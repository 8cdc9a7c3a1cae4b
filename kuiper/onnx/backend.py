"""kuiper as an ONNX backend (``onnx.backend.base.Backend``), the interface ONNX's conformance suite drives.

    import kuiper.onnx.backend as backend
    outputs = backend.prepare(model_proto).run([x, y])

``prepare`` checks the model (onnx.checker) and translates it; ``run`` feeds the graph inputs in order
and returns the outputs in order. ONNX may pass a shape-deciding argument (Reshape's shape, Slice's
starts ...) as a graph input, where kuiper needs it when the model is built: such inputs are found on
the first run (the frontend names them), fixed to the values fed (``known_inputs``), and the model is
built again only when those values change.
"""

from __future__ import annotations

import importlib
from collections import namedtuple

import numpy as np

from .. import graph
from ..errors import KuiperError
from ..graph import Model
from .protobuf import onnx_package
from .reader import read_proto
from .values import KnownInputError

onnx_package()  # a clear error when onnx is missing
_onnx_backend = importlib.import_module("onnx.backend.base")


class KuiperRep(_onnx_backend.BackendRep):
    """A prepared model: built once per set of values of the inputs that decide shapes."""

    def __init__(self, model, backend: str | None = None, fuse: bool = True):
        self.model = model
        self.backend = backend
        self.fuse = fuse
        initializers = {tensor.name for tensor in model.graph.initializer}
        self.input_names = [value.name for value in model.graph.input if value.name not in initializers]
        self.output_names = [value.name for value in model.graph.output]
        self.fixed: list[str] = []  # graph inputs that decide shapes
        self._built: dict[tuple, Model] = {}
        self._first = self._build({})  # translates now, so an unsupported model fails in prepare

    def _build(self, known: dict) -> Model | None:
        try:
            ir = read_proto(self.model, known)
        except KnownInputError as exc:
            if exc.input_name in known or exc.input_name not in self.input_names:
                raise  # fixed already, or not the model's own input (a sub-graph's)
            self.fixed.append(exc.input_name)
            return None
        return graph.build(ir, backend=self.backend, fuse=self.fuse)

    def run(self, inputs, **kwargs):
        feeds = dict(inputs) if isinstance(inputs, dict) else dict(zip(self.input_names, inputs))
        missing = [name for name in self.input_names if name not in feeds]
        if missing:
            raise KuiperError(f"the model takes inputs {self.input_names}; not given: {missing}")
        model = self._first if not self.fixed else None
        while model is None:
            known = {name: np.asarray(feeds[name]) for name in self.fixed}
            key = tuple((name, value.dtype.str, value.shape, value.tobytes()) for name, value in known.items())
            model = self._built.get(key)
            if model is None:
                model = self._build(known)
                if model is not None:
                    self._built[key] = model
        arrays = [np.asarray(feeds[name]) for name in self.input_names if name not in self.fixed]
        outputs = model(*arrays, to_numpy=True)
        outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
        return namedtuple("Outputs", [f"o{i}" for i in range(len(outputs))])(*outputs)


class KuiperBackend(_onnx_backend.Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return device == "CPU"

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> KuiperRep:
        super().prepare(model, device, **kwargs)  # onnx.checker
        return KuiperRep(model, backend=kwargs.get("backend"), fuse=kwargs.get("fuse", True))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = KuiperBackend.prepare
run_model = KuiperBackend.run_model
supports_device = KuiperBackend.supports_device
is_compatible = KuiperBackend.is_compatible
