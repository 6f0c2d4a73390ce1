#include "speculative/frspec_table.h"

#include <cstring>
#include <fstream>

#include "common/error.h"

namespace specgen {

std::vector<int32_t> read_frspec_table(const std::string& path, int32_t n_vocab, int32_t n) {
    const std::string where = "frspec table " + path;
    if (path.empty()) throw invalid_argument_error("frspec = " + std::to_string(n) + " needs frspec_path (a table from tools/build_frspec_table.py)");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw invalid_argument_error(where + ": cannot open");
    char magic[4];
    uint32_t hdr[3];
    f.read(magic, 4);
    f.read(reinterpret_cast<char*>(hdr), sizeof hdr);
    if (!f || std::memcmp(magic, "SGFR", 4) != 0) throw invalid_argument_error(where + ": not an FR-Spec table (magic 'SGFR' missing)");
    if (hdr[0] != 1) throw invalid_argument_error(where + ": version " + std::to_string(hdr[0]) + " unsupported (expected 1)");
    if (int64_t(hdr[1]) != n_vocab)
        throw invalid_argument_error(where + ": built for a vocabulary of " + std::to_string(hdr[1]) + " tokens, the model has " +
                                     std::to_string(n_vocab));
    if (n < 1 || uint32_t(n) > hdr[2])
        throw invalid_argument_error(where + ": holds " + std::to_string(hdr[2]) + " ids, frspec = " + std::to_string(n) + " asked");
    std::vector<int32_t> ids(static_cast<size_t>(n));
    f.read(reinterpret_cast<char*>(ids.data()), std::streamsize(sizeof(int32_t) * ids.size()));
    if (!f) throw invalid_argument_error(where + ": truncated (header says " + std::to_string(hdr[2]) + " ids)");
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

}  // namespace specgen
