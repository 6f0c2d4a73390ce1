// GGUF reader: mmaps a file read-only and validates every field before anything uses it.
//
// Layout (versions 2 and 3, little endian):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | kv pairs | tensor infos | pad | data
// A kv pair is (string key, u32 value type, value); a string is (u64 length, bytes); an array is
// (u32 element type, u64 count, elements). A tensor info is (string name, u32 n_dims, u64 ne[n_dims],
// u32 ggml type, u64 offset relative to the aligned data section).
//
// Every violation throws model_load_error naming the file and the field, so a truncated or hostile
// file never reads outside the mapping and never sizes an allocation from an unchecked count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "quant/ggml_type.h"

namespace specgen {

enum class gguf_value_type : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char* gguf_value_type_name(gguf_value_type t);

// One metadata value. Scalars are widened into the matching field; arrays point into the mapping.
struct gguf_value {
    gguf_value_type type = gguf_value_type::UINT8;
    gguf_value_type elem_type = gguf_value_type::UINT8;  // for ARRAY
    int64_t i = 0;        // all integer types and BOOL (UINT64 values above INT64_MAX are rejected)
    double f = 0.0;       // FLOAT32 / FLOAT64
    std::string_view s;   // STRING
    // ARRAY of numbers: raw little-endian elements inside the mapping; ARRAY of strings: views.
    const uint8_t* array_data = nullptr;
    uint64_t array_count = 0;
    std::vector<std::string_view> strings;
};

struct gguf_tensor {
    std::string name;
    ggml_type type = ggml_type::F32;
    int n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous dimension (ggml order)
    uint64_t offset = 0;           // relative to the data section
    size_t nbytes = 0;
    const uint8_t* data = nullptr;  // inside the mapping
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class gguf_file {
public:
    // Maps and validates `path`. Throws model_load_error on any problem.
    explicit gguf_file(const std::string& path);
    ~gguf_file();
    gguf_file(const gguf_file&) = delete;
    gguf_file& operator=(const gguf_file&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    size_t file_size() const { return size_; }
    // Drops the pages of [p, p + n) from the process's resident memory when the range lies in this
    // file's mapping (ignored otherwise): the mapping is read-only, so a later read maps them again from
    // the file. For tensors a backend has copied into its own layout.
    void release_pages(const void* p, size_t n) const;
    uint32_t alignment() const { return alignment_; }

    bool has(const std::string& key) const { return kv_.count(key) != 0; }
    const gguf_value* find(const std::string& key) const;
    const std::map<std::string, gguf_value>& metadata() const { return kv_; }

    // Typed accessors: throw model_load_error naming the key when missing or of the wrong type.
    std::string get_string(const std::string& key) const;
    int64_t get_int(const std::string& key) const;
    double get_float(const std::string& key) const;  // accepts integer values too
    bool get_bool(const std::string& key) const;
    std::vector<std::string_view> get_string_array(const std::string& key) const;
    std::vector<float> get_float_array(const std::string& key) const;
    std::vector<int64_t> get_int_array(const std::string& key) const;
    // Defaults for optional keys.
    std::string get_string(const std::string& key, const std::string& def) const;
    int64_t get_int(const std::string& key, int64_t def) const;
    double get_float(const std::string& key, double def) const;
    bool get_bool(const std::string& key, bool def) const;

    const std::vector<gguf_tensor>& tensors() const { return tensors_; }
    const gguf_tensor* find_tensor(const std::string& name) const;
    // Throws model_load_error naming the tensor when missing.
    const gguf_tensor& tensor(const std::string& name) const;

    // Human-readable rendering of a value (for `metadata` in Python and the CLI).
    std::string value_to_string(const gguf_value& v, size_t max_array = 8) const;

private:
    void parse();
    [[noreturn]] void fail(const std::string& what) const;

    std::string path_;
    int fd_ = -1;
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    std::map<std::string, gguf_value> kv_;
    std::vector<gguf_tensor> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

}  // namespace specgen
