// A ragged batch for evaluator::forward_batch: several sequences' new tokens evaluated in one pass.
// Entry i holds n_i tokens of sequence seq_i at positions pos0_i .. pos0_i + n_i - 1 (a prefill
// chunk, a decode row, or a pending token plus its drafted tokens); the batch's rows are the
// entries' tokens in order, and so are the hidden rows forward_batch leaves.
#pragma once
#include <cstdint>
#include <vector>

namespace specgen {

class batch {
public:
    struct entry {
        int seq;   // KV cache sequence (slot) the rows belong to
        int pos0;  // position of the first token
        int n;     // tokens
        int row0;  // index of the entry's first row in the batch
    };

    void clear() {
        entries_.clear();
        tokens_.clear();
    }
    // Appends n >= 1 tokens of sequence `seq` at positions pos0.. (checked by forward_batch).
    void add(int seq, const int32_t* tokens, int n, int pos0) {
        entries_.push_back(entry{seq, pos0, n, int(tokens_.size())});
        tokens_.insert(tokens_.end(), tokens, tokens + (n > 0 ? n : 0));
    }
    const std::vector<entry>& entries() const { return entries_; }
    const int32_t* tokens() const { return tokens_.data(); }  // [n_rows()], host memory
    int n_rows() const { return int(tokens_.size()); }
    bool empty() const { return entries_.empty(); }

private:
    std::vector<entry> entries_;
    std::vector<int32_t> tokens_;
};

}  // namespace specgen
