#include "speculative/frspec_table.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/error.h"

namespace specgen {

namespace {
// The first n ids of the table at `path`. if_fits: at most n, and none for another vocabulary size.
std::vector<int32_t> read_ids(const std::string& path, int32_t n_vocab, int32_t n, bool if_fits) {
    const std::string where = "frspec table " + path;
    std::ifstream f(path, std::ios::binary);
    if (!f) throw invalid_argument_error(where + ": cannot open");
    char magic[4];
    struct {
        uint32_t version, n_vocab, n_ids;
    } h{};
    f.read(magic, 4);
    f.read(reinterpret_cast<char*>(&h), sizeof h);
    if (!f || std::memcmp(magic, "SGFR", 4) != 0) throw invalid_argument_error(where + ": not an FR-Spec table (magic 'SGFR' missing)");
    if (h.version != 1) throw invalid_argument_error(where + ": version " + std::to_string(h.version) + " unsupported (expected 1)");
    if (int64_t(h.n_vocab) != n_vocab) {
        if (if_fits) return {};
        throw invalid_argument_error(where + ": built for a vocabulary of " + std::to_string(h.n_vocab) + " tokens, the model has " +
                                     std::to_string(n_vocab));
    }
    if (if_fits) n = int32_t(std::min<int64_t>(n, h.n_ids));
    if (n < 1 || uint32_t(n) > h.n_ids)
        throw invalid_argument_error(where + ": holds " + std::to_string(h.n_ids) + " ids, " + std::to_string(n) + " asked");
    std::vector<int32_t> ids(static_cast<size_t>(n));
    f.read(reinterpret_cast<char*>(ids.data()), std::streamsize(sizeof(int32_t) * ids.size()));
    if (!f) throw invalid_argument_error(where + ": truncated (header says " + std::to_string(h.n_ids) + " ids)");
    std::vector<uint8_t> seen(size_t(n_vocab), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
        const int32_t id = ids[i];
        if (id < 0 || id >= n_vocab || seen[size_t(id)])
            throw invalid_argument_error(where + ": entry " + std::to_string(i) + " = " + std::to_string(id) +
                                         (id < 0 || id >= n_vocab ? " out of range" : " repeated"));
        seen[size_t(id)] = 1;
    }
    return ids;
}
}  // namespace

std::vector<int32_t> read_frspec_table(const std::string& path, int32_t n_vocab, int32_t n) {
    if (path.empty()) throw invalid_argument_error("frspec = " + std::to_string(n) + " needs frspec_path (a table from tools/build_frspec_table.py)");
    return read_ids(path, n_vocab, n, false);
}

std::vector<int32_t> read_frspec_table_if_fits(const std::string& path, int32_t n_vocab, int32_t n) {
    if (path.empty()) return {};
    return read_ids(path, n_vocab, n, true);
}

}  // namespace specgen
