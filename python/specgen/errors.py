"""Typed exceptions raised by specgen. Every one derives from SpecgenError."""


class SpecgenError(Exception):
    """Base class of every error specgen raises on purpose."""


class ModelLoadError(SpecgenError):
    """A model file is missing, truncated, corrupt, or of an unsupported type or architecture."""


class ContextOverflowError(SpecgenError):
    """The prompt (plus the tokens to generate) does not fit into n_ctx."""


class InvalidParameterError(SpecgenError, ValueError):
    """A parameter is outside its domain; also a ValueError, as Python users expect."""


class SpecgenNotImplementedError(SpecgenError, NotImplementedError):
    """A feature that this build or version of specgen does not provide yet."""


class DeviceError(SpecgenError, RuntimeError):
    """The compute device asked for cannot be used: CUDA is not compiled into this build, no CUDA
    device is present, device memory ran out, or a CUDA call failed."""


class QueueFullError(SpecgenError):
    """Every slot of the Generator is busy and its waiting queue (max_queued) is full."""


class GenerationCancelled(SpecgenError):
    """A generation was stopped by its caller."""
