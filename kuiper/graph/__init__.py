"""Graph building and execution: ModelIR -> Model."""

from .build import build
from .model import Model, OpExecutionError, TensorSpec

__all__ = ["build", "Model", "TensorSpec", "OpExecutionError"]
