"""Graph building and execution: ModelIR -> Model."""

from .build import build
from .model import Model, OpExecutionError, Origin, StepObserver, TensorSpec

__all__ = ["build", "Model", "Origin", "StepObserver", "TensorSpec", "OpExecutionError"]
