"""specgen: speculative-decoding inference for GGUF models.

    from specgen import Generator
    g = Generator()                       # Gemma 3 270M from the specgen[gemma] extra
    print(g.generate("Once upon a time", max_tokens=64, temperature=0).text)
"""
from specgen.errors import (
    ContextOverflowError,
    DeviceError,
    GenerationCancelled,
    InvalidParameterError,
    ModelLoadError,
    QueueFullError,
    SpecgenError,
    SpecgenNotImplementedError,
)
from specgen.generator import GenerationResult, GenerationStats, Generator
from specgen.llama import Llama  # llama-cpp-python's class over the same engine
from specgen.request import Request, StepEvent
from specgen import bounds, paths, verify  # noqa: E402  (submodules as attributes)
from specgen._core import Rng, SamplingParams
from specgen._core import __version__  # CMake's project(VERSION): one version for every front-end

__all__ = [
    "Generator",
    "Llama",
    "Request",
    "StepEvent",
    "bench",
    "bounds",
    "verify",
    "paths",
    "Rng",
    "SamplingParams",
    "GenerationResult",
    "GenerationStats",
    "SpecgenError",
    "ModelLoadError",
    "ContextOverflowError",
    "DeviceError",
    "InvalidParameterError",
    "SpecgenNotImplementedError",
    "GenerationCancelled",
    "QueueFullError",
]


def __getattr__(name):
    # `specgen.bench` (a subpackage) loads on first use: `import specgen` stays light.
    if name == "bench":
        import importlib

        return importlib.import_module("specgen.bench")
    raise AttributeError(f"module 'specgen' has no attribute {name!r}")
