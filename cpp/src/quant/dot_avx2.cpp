// placeholder
#include "quant/kernels.h"
namespace specgen { namespace quant {
gemm_fn gemm_kernel_avx2(ggml_type) { return nullptr; }
} }
