// Backend selection by device string, and the host-memory defaults of the backend interface
// (used by the CPU backend; the CUDA backend overrides them with device memory).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include <sys/mman.h>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/params.h"

namespace specgen {

namespace {
constexpr std::align_val_t kAlign{64};
// Every host buffer starts with a 64-byte header holding its size, so that free() knows how it was
// allocated and the memory after it keeps the 64-byte alignment.
constexpr size_t kHeader = 64;
// From this size on a buffer is mapped from the kernel, whose fresh pages read as zeros without being
// touched: a page becomes resident when something is written to it. The KV cache above all: its
// n_ctx x n_parallel rows cost memory (and the page faults of zero-filling them, seconds at load for a
// 32k context) only as far as sequences actually reach.
constexpr size_t kMappedFrom = size_t(1) << 20;
}  // namespace

uint64_t next_weight_version() {
    static std::atomic<uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

void* backend::alloc(size_t bytes) {
    uint8_t* base;
    if (bytes >= kMappedFrom) {
        void* m = ::mmap(nullptr, kHeader + bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) throw std::bad_alloc();
        base = static_cast<uint8_t*>(m);
    } else {
        base = static_cast<uint8_t*>(::operator new(kHeader + bytes, kAlign));
        std::memset(base, 0, kHeader + bytes);
    }
    std::memcpy(base, &bytes, sizeof bytes);
    return base + kHeader;
}

void backend::free(void* p) {
    if (!p) return;
    uint8_t* base = static_cast<uint8_t*>(p) - kHeader;
    size_t bytes;
    std::memcpy(&bytes, base, sizeof bytes);
    if (bytes >= kMappedFrom) ::munmap(base, kHeader + bytes);
    else ::operator delete(base, kAlign);
}

size_t available_host_memory() {
    std::FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    std::fclose(f);
    return size_t(kib) * 1024;
}

void backend::upload(void* dst, const void* host_src, size_t bytes) { std::memcpy(dst, host_src, bytes); }

void backend::download(void* host_dst, const void* src, size_t bytes) { std::memcpy(host_dst, src, bytes); }

void backend::copy(void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); }

void backend::attention_batch(const float* q, const attention_seq* seqs, int n_seqs, const int32_t* pos,
                              const attention_params& p, float* out) {
    const int64_t Q = int64_t(p.n_head) * p.head_dim;
    for (int i = 0; i < n_seqs; ++i) {
        const attention_seq& s = seqs[i];
        if (s.type_k != ggml_type::F32 || s.type_v != ggml_type::F32)
            throw invalid_argument_error(std::string("the ") + name() + " backend attends over f32 KV caches only");
        // attention() reads whole rows: [n_ctx][n_head_kv][head_dim] floats.
        const size_t head = size_t(p.head_dim) * sizeof(float), row = size_t(p.n_head_kv) * head;
        if (s.row_bytes_k != row || s.row_bytes_v != row || s.head_bytes_k != head || s.head_bytes_v != head)
            throw invalid_argument_error(std::string("the ") + name() + " backend attends over whole-row KV caches only");
        attention(q + s.row0 * Q, static_cast<const float*>(s.k), static_cast<const float*>(s.v), s.n_rows,
                  pos + s.row0, s.n_kv, p, out + s.row0 * Q);
    }
}

std::unique_ptr<backend> make_backend(const std::string& device, int n_threads) {
    const device_spec d = parse_device(device);  // the one parser (engine/params.h)
    return d.cuda ? make_cuda_backend(d.index) : make_cpu_backend(n_threads);
}

#ifndef SPECGEN_WITH_CUDA
// This build has no CUDA backend (SPECGEN_CUDA=OFF, or AUTO without nvcc).
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::unique_ptr<backend> make_cuda_backend(int device) {
    throw device_error("device 'cuda:" + std::to_string(device) +
                       "' requested, but this build of specgen has no CUDA backend (it was built without nvcc or with "
                       "SPECGEN_CUDA=OFF; rebuild with -DSPECGEN_CUDA=ON, e.g. "
                       "pip install . -C cmake.define.SPECGEN_CUDA=ON)");
}
#endif

}  // namespace specgen
