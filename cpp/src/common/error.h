// Typed errors thrown inside the library. The C API and the Python binding translate each
// subclass into a status code / Python exception; library code never calls exit().
#pragma once
#include <stdexcept>
#include <string>

namespace specgen {

struct error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A model file that cannot be used: corrupt, truncated, unsupported type or architecture.
struct model_load_error : error {
    using error::error;
};

// A parameter outside its domain (negative temperature, unknown option, token id out of range).
struct invalid_argument_error : error {
    using error::error;
};

// The prompt plus the requested tokens do not fit into n_ctx.
struct context_overflow_error : error {
    using error::error;
};

// A feature that is not built yet.
struct not_implemented_error : error {
    using error::error;
};

// The compute device asked for cannot be used: CUDA not compiled into this build, no CUDA device,
// device memory exhausted, or a CUDA call failed (the message names the call and the device).
struct device_error : error {
    using error::error;
};

// Every slot is busy and the waiting queue is full (generator_params::max_queued): try again later.
struct queue_full_error : error {
    using error::error;
};

// A generation stopped by the caller (callback returned false, KeyboardInterrupt).
struct cancelled_error : error {
    using error::error;
};

}  // namespace specgen
