// SSD's speculation cache (docs/ALGORITHMS.md section 4; speculative/ssd/ssd.h): the branches drafted
// for round t+1 while round t verifies, keyed by the verdict they serve (accepted length k, bonus).
// Fixed storage, reused every round; the owner guards it (ssd_speculator's mutex while its worker runs).
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/sampling.h"
#include "speculative/ssd/handover.h"

namespace specgen {

struct ssd_branch {
    uint64_t round = 0;  // the round whose verdict it serves
    int k = -1;
    int32_t bonus = -1;
    std::vector<int32_t> tokens;              // x'_1..x'_g
    std::vector<token_dist> q;                // q'_i, the (Saguaro) distribution x'_i was sampled from
    std::vector<std::vector<int32_t>> cands;  // per position: the raw top tokens (next round's bonus candidates)
    handover_rows rows;                       // all-layers self drafter only
};

class speculation_cache {
public:
    void resize(size_t capacity) { slots_.resize(capacity); }
    size_t capacity() const { return slots_.size(); }
    void clear() { n_ = 0; }
    int size() const { return n_; }
    // Slot i (< capacity()) to draft a branch into; commit(i, ...) makes it entry i (entries 0..i).
    ssd_branch& slot(int i) { return slots_[size_t(i)]; }
    void commit(int i, uint64_t round, int k, int32_t bonus);
    // The entry serving verdict (k, bonus) of `round`, or -1.
    int find(uint64_t round, int k, int32_t bonus) const;
    const ssd_branch& operator[](int i) const { return slots_[size_t(i)]; }

private:
    std::vector<ssd_branch> slots_;
    int n_ = 0;
};

}  // namespace specgen
