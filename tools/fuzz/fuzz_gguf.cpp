// libFuzzer target: arbitrary bytes as a model file -> gguf_file + read_hparams + model + tokenizer.
// Every input must either load or throw a specgen::error; anything else (a sanitizer report, an
// uncaught std:: exception, a timeout, an allocation over -rss_limit_mb) is a finding.
// The bytes go through a memfd so the reader's real open/fstat/mmap path is exercised.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static int fd = memfd_create("fuzz.gguf", 0);
    if (fd < 0) return 0;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
        auto f = std::make_shared<const specgen::gguf_file>(path);
        for (const auto& [k, v] : f->metadata()) (void)f->value_to_string(v);
        try {
            (void)specgen::read_hparams(*f);
            specgen::model m(f);
            (void)m.bytes_per_token();
        } catch (const specgen::error&) {
        }
        specgen::tokenizer tok(*f);
        const auto ids = tok.encode("Hello <start_of_turn> world \xff\xfe 123", true, true);
        (void)tok.decode(ids);
    } catch (const specgen::error&) {
    }
    return 0;
}
