"""Graph building and execution: ModelIR -> Model."""

from .build import build
from .model import Model, Origin, TensorSpec
from .plan import OpExecutionError, StepObserver

__all__ = ["build", "Model", "Origin", "StepObserver", "TensorSpec", "OpExecutionError"]
