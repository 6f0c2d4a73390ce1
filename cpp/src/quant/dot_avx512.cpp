// placeholder
#include "quant/kernels.h"
namespace specgen { namespace quant {
gemm_fn gemm_kernel_avx512(ggml_type) { return nullptr; }
} }
