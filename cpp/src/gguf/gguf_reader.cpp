#include "gguf/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <sstream>

#include "common/error.h"

namespace specgen {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little endian
// Tensors larger than this many elements are rejected: no real model comes near, and it keeps
// every byte-size computation far from overflow.
constexpr int64_t kMaxElements = int64_t(1) << 40;
constexpr uint64_t kMaxKeyLength = 1 << 16;

size_t scalar_size(gguf_value_type t) {
    switch (t) {
        case gguf_value_type::UINT8: case gguf_value_type::INT8: case gguf_value_type::BOOL: return 1;
        case gguf_value_type::UINT16: case gguf_value_type::INT16: return 2;
        case gguf_value_type::UINT32: case gguf_value_type::INT32: case gguf_value_type::FLOAT32: return 4;
        case gguf_value_type::UINT64: case gguf_value_type::INT64: case gguf_value_type::FLOAT64: return 8;
        default: return 0;
    }
}

bool is_integer(gguf_value_type t) {
    return scalar_size(t) != 0 && t != gguf_value_type::FLOAT32 && t != gguf_value_type::FLOAT64;
}

// Bounds-checked little-endian cursor over the mapping. Every read names what it was reading.
struct cursor {
    const uint8_t* base;
    size_t size;
    size_t pos = 0;
    const gguf_file* file;
    std::function<void(const std::string&)> fail;

    void need(size_t n, const std::string& what) {
        if (n > size - pos) {
            std::ostringstream ss;
            ss << what << ": needs " << n << " bytes at offset " << pos << " but the file ends at " << size
               << " (truncated?)";
            fail(ss.str());
        }
    }
    template <typename T>
    T read(const std::string& what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, base + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string_view read_string(const std::string& what) {
        uint64_t len = read<uint64_t>(what + " (string length)");
        if (len > size - pos) {
            std::ostringstream ss;
            ss << what << ": string length " << len << " exceeds the " << (size - pos) << " bytes left";
            fail(ss.str());
        }
        std::string_view s(reinterpret_cast<const char*>(base + pos), static_cast<size_t>(len));
        pos += static_cast<size_t>(len);
        return s;
    }
};

int64_t read_int_scalar(cursor& c, gguf_value_type t, const std::string& what) {
    switch (t) {
        case gguf_value_type::UINT8: return c.read<uint8_t>(what);
        case gguf_value_type::INT8: return c.read<int8_t>(what);
        case gguf_value_type::BOOL: {
            uint8_t b = c.read<uint8_t>(what);
            if (b > 1) c.fail(what + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
            return b;
        }
        case gguf_value_type::UINT16: return c.read<uint16_t>(what);
        case gguf_value_type::INT16: return c.read<int16_t>(what);
        case gguf_value_type::UINT32: return c.read<uint32_t>(what);
        case gguf_value_type::INT32: return c.read<int32_t>(what);
        case gguf_value_type::INT64: return c.read<int64_t>(what);
        case gguf_value_type::UINT64: {
            uint64_t v = c.read<uint64_t>(what);
            if (v > static_cast<uint64_t>(INT64_MAX)) c.fail(what + ": uint64 value too large");
            return static_cast<int64_t>(v);
        }
        default: return 0;
    }
}

int64_t element_as_int(const uint8_t* p, gguf_value_type t) {
    switch (t) {
        case gguf_value_type::UINT8: case gguf_value_type::BOOL: return *p;
        case gguf_value_type::INT8: return static_cast<int8_t>(*p);
        case gguf_value_type::UINT16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
        case gguf_value_type::INT16: { int16_t v; std::memcpy(&v, p, 2); return v; }
        case gguf_value_type::UINT32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
        case gguf_value_type::INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
        case gguf_value_type::UINT64: case gguf_value_type::INT64: { int64_t v; std::memcpy(&v, p, 8); return v; }
        default: return 0;
    }
}

double element_as_float(const uint8_t* p, gguf_value_type t) {
    if (t == gguf_value_type::FLOAT32) { float v; std::memcpy(&v, p, 4); return v; }
    if (t == gguf_value_type::FLOAT64) { double v; std::memcpy(&v, p, 8); return v; }
    return static_cast<double>(element_as_int(p, t));
}

}  // namespace

const char* gguf_value_type_name(gguf_value_type t) {
    static const char* names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                  "bool", "string", "array", "uint64", "int64", "float64"};
    auto i = static_cast<uint32_t>(t);
    return i < 13 ? names[i] : "unknown";
}

gguf_file::gguf_file(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO (or a device) named like a model would otherwise block forever
    // waiting for a writer; it has no effect on regular files, and anything else is rejected below.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) { int e = errno; ::close(fd_); fd_ = -1; fail(std::string("cannot stat: ") + std::strerror(e)); }
    if (!S_ISREG(st.st_mode)) { ::close(fd_); fd_ = -1; fail("not a regular file"); }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ < 24) { ::close(fd_); fd_ = -1; fail("file is " + std::to_string(size_) + " bytes, smaller than a GGUF header"); }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) { int e = errno; ::close(fd_); fd_ = -1; fail(std::string("mmap failed: ") + std::strerror(e)); }
    base_ = static_cast<const uint8_t*>(p);
    try {
        parse();
    } catch (...) {
        ::munmap(const_cast<uint8_t*>(base_), size_);
        ::close(fd_);
        base_ = nullptr;
        fd_ = -1;
        throw;
    }
}

gguf_file::~gguf_file() {
    if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
    if (fd_ >= 0) ::close(fd_);
}

void gguf_file::release_pages(const void* p, size_t n) const {
    const auto* b = static_cast<const uint8_t*>(p);
    if (!base_ || b < base_ || n > size_ || b - base_ > std::ptrdiff_t(size_ - n)) return;
    // Whole pages inside the range only: its neighbours at either end may still be read in place.
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (uintptr_t(b) + page - 1) / page * page, last = (uintptr_t(b) + n) / page * page;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void gguf_file::fail(const std::string& what) const {
    throw model_load_error("GGUF " + path_ + ": " + what);
}

void gguf_file::parse() {
    cursor c{base_, size_, 0, this, [this](const std::string& w) { fail(w); }};
    uint32_t magic = c.read<uint32_t>("magic");
    if (magic != kMagic) fail("bad magic (not a GGUF file)");
    version_ = c.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3)
        fail("unsupported version " + std::to_string(version_) + " (supported: 2, 3)");
    uint64_t n_tensors = c.read<uint64_t>("tensor count");
    uint64_t n_kv = c.read<uint64_t>("metadata count");
    // Each kv needs >= 8 (key length) + 4 (type) + 1 byte; each tensor info >= 8 + 4 + 8 + 4 + 8.
    if (n_kv > (size_ - c.pos) / 13) fail("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
    if (n_tensors > (size_ - c.pos) / 32) fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");

    for (uint64_t i = 0; i < n_kv; ++i) {
        std::string where = "metadata #" + std::to_string(i);
        std::string_view key = c.read_string(where + " key");
        if (key.empty() || key.size() > kMaxKeyLength) fail(where + ": invalid key length " + std::to_string(key.size()));
        std::string k(key);
        where = "metadata '" + k + "'";
        if (kv_.count(k)) fail(where + ": duplicate key");
        gguf_value v;
        uint32_t t = c.read<uint32_t>(where + " type");
        if (t > 12) fail(where + ": unknown value type " + std::to_string(t));
        v.type = static_cast<gguf_value_type>(t);
        if (v.type == gguf_value_type::STRING) {
            v.s = c.read_string(where);
        } else if (v.type == gguf_value_type::ARRAY) {
            uint32_t et = c.read<uint32_t>(where + " array element type");
            if (et > 12 || et == static_cast<uint32_t>(gguf_value_type::ARRAY))
                fail(where + ": unsupported array element type " + std::to_string(et));
            v.elem_type = static_cast<gguf_value_type>(et);
            v.array_count = c.read<uint64_t>(where + " array length");
            if (v.elem_type == gguf_value_type::STRING) {
                if (v.array_count > (size_ - c.pos) / 8)
                    fail(where + ": array length " + std::to_string(v.array_count) + " cannot fit in the file");
                v.strings.reserve(static_cast<size_t>(v.array_count));
                for (uint64_t j = 0; j < v.array_count; ++j) v.strings.push_back(c.read_string(where + "[" + std::to_string(j) + "]"));
            } else {
                size_t es = scalar_size(v.elem_type);
                if (v.array_count > (size_ - c.pos) / es)
                    fail(where + ": array length " + std::to_string(v.array_count) + " exceeds the file size");
                v.array_data = base_ + c.pos;
                c.pos += static_cast<size_t>(v.array_count) * es;
            }
        } else if (v.type == gguf_value_type::FLOAT32) {
            v.f = c.read<float>(where);
        } else if (v.type == gguf_value_type::FLOAT64) {
            v.f = c.read<double>(where);
        } else {
            v.i = read_int_scalar(c, v.type, where);
        }
        kv_.emplace(std::move(k), std::move(v));
    }

    if (const gguf_value* a = find("general.alignment")) {
        if (!is_integer(a->type)) fail("general.alignment: expected an integer");
        if (a->i <= 0 || a->i > (1 << 20) || (a->i & (a->i - 1)) != 0)
            fail("general.alignment " + std::to_string(a->i) + " is not a power of two");
        alignment_ = static_cast<uint32_t>(a->i);
    }

    tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        gguf_tensor t;
        std::string where = "tensor #" + std::to_string(i);
        std::string_view name = c.read_string(where + " name");
        if (name.empty() || name.size() > 1024) fail(where + ": invalid name length " + std::to_string(name.size()));
        t.name = std::string(name);
        where = "tensor " + t.name;
        if (tensor_index_.count(t.name)) fail(where + ": duplicate tensor name");
        uint32_t n_dims = c.read<uint32_t>(where + " n_dims");
        if (n_dims < 1 || n_dims > 4) fail(where + ": n_dims " + std::to_string(n_dims) + " not in 1..4");
        t.n_dims = static_cast<int>(n_dims);
        int64_t n_el = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            uint64_t ne = c.read<uint64_t>(where + " dim");
            if (ne == 0) fail(where + ": dimension " + std::to_string(d) + " is zero");
            if (ne > static_cast<uint64_t>(kMaxElements) || static_cast<uint64_t>(n_el) > static_cast<uint64_t>(kMaxElements) / ne)
                fail(where + ": element count overflows (dimension " + std::to_string(d) + " = " + std::to_string(ne) + ")");
            t.ne[d] = static_cast<int64_t>(ne);
            n_el *= t.ne[d];
        }
        uint32_t type = c.read<uint32_t>(where + " type");
        const ggml_type_traits* tr = ggml_traits(type);
        if (!tr) fail(where + ": unknown tensor type " + std::to_string(type));
        t.type = static_cast<ggml_type>(type);
        if (t.ne[0] % tr->block_size != 0)
            fail(where + ": row length " + std::to_string(t.ne[0]) + " is not a multiple of the " + tr->name +
                 " block size " + std::to_string(tr->block_size));
        t.nbytes = static_cast<size_t>(n_el / tr->block_size) * tr->type_size;
        t.offset = c.read<uint64_t>(where + " offset");
        if (t.offset % alignment_ != 0)
            fail(where + ": offset " + std::to_string(t.offset) + " is not aligned to " + std::to_string(alignment_));
        tensor_index_[t.name] = tensors_.size();
        tensors_.push_back(std::move(t));
    }

    size_t data_start = (c.pos + alignment_ - 1) / alignment_ * alignment_;
    if (n_tensors > 0 && data_start > size_) fail("data section starts at " + std::to_string(data_start) + " beyond the file end");
    size_t data_size = size_ - std::min(size_, data_start);
    for (auto& t : tensors_) {
        if (t.offset > data_size || t.nbytes > data_size - t.offset) {
            std::ostringstream ss;
            ss << "tensor " << t.name << ": data [" << t.offset << ", " << t.offset + t.nbytes
               << ") lies beyond the data section of " << data_size << " bytes (truncated?)";
            fail(ss.str());
        }
        t.data = base_ + data_start + t.offset;
    }
    // Overlapping tensors would let one tensor's writes (none today) or reads alias another's.
    std::vector<const gguf_tensor*> by_offset;
    for (auto& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        const gguf_tensor* a = by_offset[i - 1];
        const gguf_tensor* b = by_offset[i];
        if (a->offset + a->nbytes > b->offset) fail("tensors " + a->name + " and " + b->name + " overlap");
    }
}

const gguf_value* gguf_file::find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

std::string gguf_file::get_string(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v) fail("missing metadata '" + key + "'");
    if (v->type != gguf_value_type::STRING) fail("metadata '" + key + "' is " + gguf_value_type_name(v->type) + ", expected string");
    return std::string(v->s);
}

int64_t gguf_file::get_int(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v) fail("missing metadata '" + key + "'");
    if (!is_integer(v->type)) fail("metadata '" + key + "' is " + gguf_value_type_name(v->type) + ", expected an integer");
    return v->i;
}

double gguf_file::get_float(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v) fail("missing metadata '" + key + "'");
    if (v->type == gguf_value_type::FLOAT32 || v->type == gguf_value_type::FLOAT64) return v->f;
    if (is_integer(v->type)) return static_cast<double>(v->i);
    fail("metadata '" + key + "' is " + gguf_value_type_name(v->type) + ", expected a number");
}

bool gguf_file::get_bool(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v) fail("missing metadata '" + key + "'");
    if (!is_integer(v->type)) fail("metadata '" + key + "' is " + gguf_value_type_name(v->type) + ", expected bool");
    return v->i != 0;
}

std::string gguf_file::get_string(const std::string& key, const std::string& def) const { return has(key) ? get_string(key) : def; }
int64_t gguf_file::get_int(const std::string& key, int64_t def) const { return has(key) ? get_int(key) : def; }
double gguf_file::get_float(const std::string& key, double def) const { return has(key) ? get_float(key) : def; }
bool gguf_file::get_bool(const std::string& key, bool def) const { return has(key) ? get_bool(key) : def; }

std::vector<std::string_view> gguf_file::get_string_array(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v) fail("missing metadata '" + key + "'");
    if (v->type != gguf_value_type::ARRAY || v->elem_type != gguf_value_type::STRING)
        fail("metadata '" + key + "' is not an array of strings");
    return v->strings;
}

std::vector<float> gguf_file::get_float_array(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v) fail("missing metadata '" + key + "'");
    if (v->type != gguf_value_type::ARRAY || v->elem_type == gguf_value_type::STRING)
        fail("metadata '" + key + "' is not an array of numbers");
    size_t es = scalar_size(v->elem_type);
    std::vector<float> out(static_cast<size_t>(v->array_count));
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(element_as_float(v->array_data + i * es, v->elem_type));
    return out;
}

std::vector<int64_t> gguf_file::get_int_array(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v) fail("missing metadata '" + key + "'");
    if (v->type != gguf_value_type::ARRAY || !is_integer(v->elem_type))
        fail("metadata '" + key + "' is not an array of integers");
    size_t es = scalar_size(v->elem_type);
    std::vector<int64_t> out(static_cast<size_t>(v->array_count));
    for (size_t i = 0; i < out.size(); ++i) out[i] = element_as_int(v->array_data + i * es, v->elem_type);
    return out;
}

const gguf_tensor* gguf_file::find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const gguf_tensor& gguf_file::tensor(const std::string& name) const {
    const gguf_tensor* t = find_tensor(name);
    if (!t) fail("missing tensor '" + name + "'");
    return *t;
}

std::string gguf_file::value_to_string(const gguf_value& v, size_t max_array) const {
    std::ostringstream ss;
    switch (v.type) {
        case gguf_value_type::STRING: return std::string(v.s);
        case gguf_value_type::FLOAT32: case gguf_value_type::FLOAT64: ss << v.f; return ss.str();
        case gguf_value_type::ARRAY: {
            ss << "[";
            size_t n = static_cast<size_t>(std::min<uint64_t>(v.array_count, max_array));
            for (size_t i = 0; i < n; ++i) {
                if (i) ss << ", ";
                if (v.elem_type == gguf_value_type::STRING) ss << v.strings[i];
                else if (v.elem_type == gguf_value_type::FLOAT32 || v.elem_type == gguf_value_type::FLOAT64)
                    ss << element_as_float(v.array_data + i * scalar_size(v.elem_type), v.elem_type);
                else ss << element_as_int(v.array_data + i * scalar_size(v.elem_type), v.elem_type);
            }
            if (v.array_count > n) ss << ", ... (" << v.array_count << " items)";
            ss << "]";
            return ss.str();
        }
        default: ss << v.i; return ss.str();
    }
}

}  // namespace specgen
