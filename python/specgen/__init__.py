"""specgen: speculative-decoding inference for GGUF models."""
from specgen.errors import (
    ContextOverflowError,
    GenerationCancelled,
    InvalidParameterError,
    ModelLoadError,
    SpecgenError,
    SpecgenNotImplementedError,
)

__version__ = "0.1.0"
