// The CUDA backend: the backend interface (cpp/src/backend/backend.h) on one NVIDIA GPU.
//
// Memory: alloc() is device memory (activations, scratch and KV caches of the evaluators that use
// this backend). Weights are uploaded once, in their quantized formats, on first use, into a cache
// keyed by the weight's host pointer (the mmapped GGUF tensor); model constants (norm weights,
// biases) likewise through constant(). Index arrays (token ids, rows, positions) arrive as host
// pointers and are uploaded per call, skipped when identical to the previous upload (a forward
// passes the same positions to every layer's rope and attention).
//
// Ordering: everything runs on one stream of this backend, in call order; download() waits for it,
// so a kernel failure surfaces there as a device_error at the latest. Sampling and verification
// stay on the host: the evaluator downloads the logits rows it needs.
//
// Threads: like the evaluator, one thread at a time per backend (each call selects the device, so
// backends on different devices may be used from different threads).
#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "cuda_common.cuh"

namespace specgen {

namespace cuda {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
    int dev = -1;
    cudaGetDevice(&dev);
    cudaGetLastError();  // clear a sticky launch error so that the message is the only report
    throw device_error("CUDA error on cuda:" + std::to_string(dev) + ": " + call + " failed with " +
                       cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ") at " + file + ":" +
                       std::to_string(line));
}

namespace {
__global__ void probe_kernel() {}
}  // namespace

bool kernels_runnable(cudaError_t* why) {
    cudaFuncAttributes attr;
    const cudaError_t e = cudaFuncGetAttributes(&attr, probe_kernel);
    if (e != cudaSuccess) cudaGetLastError();
    if (why) *why = e;
    return e == cudaSuccess;
}

}  // namespace cuda

namespace {

std::string device_name(int device) { return "cuda:" + std::to_string(device); }

class cuda_backend final : public backend {
public:
    explicit cuda_backend(int device) : device_(device) {
        SPECGEN_CUDA_CHECK(cudaSetDevice(device_));
        cudaDeviceProp prop;
        SPECGEN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
        cudaError_t why = cudaSuccess;
        if (!cuda::kernels_runnable(&why))
            throw device_error(device_name(device_) + " (" + prop.name + ", compute capability " +
                               std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                               ") cannot run this build's kernels: " + cudaGetErrorString(why) +
                               " (rebuild with -DCMAKE_CUDA_ARCHITECTURES=native)");
        SPECGEN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }

    ~cuda_backend() override {
        // No throwing here: errors at teardown are dropped.
        cudaSetDevice(device_);
        cudaStreamSynchronize(stream_);
        for (auto& [host, dev] : weights_) cudaFree(dev.ptr);
        for (auto* slot : {&ids_, &rows_, &pos_}) cudaFree(slot->dev);
        cudaStreamDestroy(stream_);
        cudaGetLastError();
    }

    const char* name() const override { return "cuda"; }
    int n_threads() const override { return 1; }

    void matmul(const weight_view& W, const float* x, int n_tokens, float* y) override {
        select();
        cuda::matmul(W.type, weights(W), W.row_bytes(), W.n_cols, nullptr, W.n_rows, x, n_tokens, y, stream_);
    }

    void matmul_selected(const weight_view& W, const int32_t* rows, int64_t n_sel, const float* x, int n_tokens,
                         float* y) override {
        if (n_sel <= 0) return;
        select();
        for (int64_t k = 0; k < n_sel; ++k) check_row(W, rows[k]);
        const int32_t* rows_d = indices(rows_, rows, size_t(n_sel));
        cuda::matmul(W.type, weights(W), W.row_bytes(), W.n_cols, rows_d, n_sel, x, n_tokens, y, stream_);
    }

    void get_rows(const weight_view& W, const int32_t* ids, int n, float* y) override {
        if (n <= 0) return;
        select();
        for (int t = 0; t < n; ++t) check_row(W, ids[t]);
        const int32_t* ids_d = indices(ids_, ids, size_t(n));
        cuda::get_rows(W.type, weights(W), W.row_bytes(), W.n_cols, ids_d, n, y, stream_);
    }

    void rms_norm(const float* x, const float* w, int n_rows, int n, float eps, float* y) override {
        select();
        cuda::rms_norm(x, w, n_rows, n, eps, y, stream_);
    }

    void rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos, const rope_freqs& freqs,
              rope_style style) override {
        if (n_tokens <= 0) return;
        select();
        const float* inv_freq = constant(freqs.inv_freq, head_dim / 2);
        cuda::rope(x, n_tokens, n_heads, head_dim, indices(pos_, pos, size_t(n_tokens)), inv_freq, freqs.mscale, style,
                   stream_);
    }

    void attention(const float* q, const float* k_cache, const float* v_cache, int n_tokens, const int32_t* pos,
                   int n_kv, const attention_params& p, float* out) override {
        if (n_tokens <= 0) return;
        select();
        cuda::attention(q, k_cache, v_cache, n_tokens, indices(pos_, pos, size_t(n_tokens)), n_kv, p, out, stream_);
    }

    void gelu_mul(const float* gate, const float* up, int64_t n, float* out) override {
        select();
        cuda::gelu_mul(gate, up, n, out, stream_);
    }
    void silu_mul(const float* gate, const float* up, int64_t n, float* out) override {
        select();
        cuda::silu_mul(gate, up, n, out, stream_);
    }
    void add(const float* a, const float* b, int64_t n, float* out) override {
        select();
        cuda::add(a, b, n, out, stream_);
    }
    void scale(const float* x, float s, int64_t n, float* out) override {
        select();
        cuda::scale(x, s, n, out, stream_);
    }

    // --- memory ---------------------------------------------------------------------------------
    bool host_memory() const override { return false; }

    void* alloc(size_t bytes) override {
        select();
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
        if (e != cudaSuccess) {
            cudaGetLastError();
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            throw device_error("out of memory on " + device_name(device_) + ": allocating " + mib(bytes) + " with " +
                               mib(free_b) + " of " + mib(total_b) + " free (" + cudaGetErrorString(e) +
                               "); use a smaller n_ctx");
        }
        SPECGEN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
        return p;
    }

    void free(void* p) override {
        if (!p) return;
        cudaSetDevice(device_);
        cudaFree(p);  // synchronizes the device: no kernel still reads p
        cudaGetLastError();
    }

    void upload(void* dst, const void* host_src, size_t bytes) override {
        select();
        SPECGEN_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    }

    void download(void* host_dst, const void* src, size_t bytes) override {
        select();
        SPECGEN_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
        SPECGEN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    void copy(void* dst, const void* src, size_t bytes) override {
        select();
        SPECGEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    }

    const float* constant(const float* host, int64_t n) override {
        if (!host || n <= 0) return nullptr;
        select();
        return static_cast<const float*>(resident(host, size_t(n) * sizeof(float)));
    }

private:
    struct device_copy {
        void* ptr = nullptr;
        size_t bytes = 0;
        uint64_t version = 0;  // weight_view::version of the host rows it copies
    };
    // A device array of int32 indices and the host values it holds.
    struct index_slot {
        std::vector<int32_t> host;
        int32_t* dev = nullptr;
        size_t capacity = 0;
    };

    static std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

    void select() { SPECGEN_CUDA_CHECK(cudaSetDevice(device_)); }

    static void check_row(const weight_view& W, int32_t r) {
        if (r < 0 || r >= W.n_rows)
            throw invalid_argument_error("token id " + std::to_string(r) + " out of range [0, " + std::to_string(W.n_rows) +
                                         ")");
    }

    // The device copy of `bytes` bytes of host memory at `host` as of `version` (weight_view::version;
    // 0 = immutable), uploaded on first use and again when the host rows changed since.
    const void* resident(const void* host, size_t bytes, uint64_t version = 0) {
        auto it = weights_.find(host);
        if (it != weights_.end() && it->second.bytes >= bytes && it->second.version == version)
            return it->second.ptr;
        if (it != weights_.end() && it->second.bytes >= bytes) {  // rows rewritten in place: refresh them
            upload(it->second.ptr, host, bytes);
            it->second.version = version;
            return it->second.ptr;
        }
        if (it != weights_.end()) {  // the same pointer seen with a smaller extent before
            weight_bytes_ -= it->second.bytes;
            free(it->second.ptr);
            weights_.erase(it);
        }
        void* p = alloc(bytes);
        try {
            upload(p, host, bytes);
        } catch (...) {
            free(p);
            throw;
        }
        weights_[host] = device_copy{p, bytes, version};
        weight_bytes_ += bytes;
        return p;
    }

    const void* weights(const weight_view& W) {
        if (!cuda::weight_type_supported(W.type))
            throw not_implemented_error(std::string("the CUDA backend cannot multiply weights of type ") +
                                        ggml_type_name(W.type));
        return resident(W.data, size_t(W.n_rows) * W.row_bytes(), W.version);
    }

    const int32_t* indices(index_slot& s, const int32_t* host, size_t n) {
        if (s.host.size() == n && std::equal(s.host.begin(), s.host.end(), host)) return s.dev;
        if (n > s.capacity) {
            free(s.dev);
            s.dev = nullptr;
            s.capacity = 0;
            s.host.clear();
            s.dev = static_cast<int32_t*>(alloc(n * sizeof(int32_t)));
            s.capacity = n;
        }
        upload(s.dev, host, n * sizeof(int32_t));
        s.host.assign(host, host + n);
        return s.dev;
    }

    int device_;
    cudaStream_t stream_ = nullptr;
    std::unordered_map<const void*, device_copy> weights_;  // weights and constants by host pointer
    size_t weight_bytes_ = 0;
    index_slot ids_, rows_, pos_;
};

}  // namespace

bool cuda_compiled() { return true; }

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

std::unique_ptr<backend> make_cuda_backend(int device) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) cudaGetLastError();
    if (e != cudaSuccess || n == 0) {
        const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
        throw device_error("device '" + device_name(device) + "' requested, but no CUDA device is usable (" +
                           (e != cudaSuccess ? std::string(cudaGetErrorString(e)) : std::string("0 devices")) +
                           "; CUDA_VISIBLE_DEVICES=" + (visible ? visible : "<unset>") +
                           "): is an NVIDIA GPU present and its driver installed? Use device='cpu' otherwise");
    }
    if (device < 0 || device >= n)
        throw device_error("device '" + device_name(device) + "' requested, but only " + std::to_string(n) +
                           " CUDA device(s) are present (cuda:0 .. cuda:" + std::to_string(n - 1) + ")");
    return std::make_unique<cuda_backend>(device);
}

}  // namespace specgen
