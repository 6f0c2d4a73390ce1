#include "speculative/ssd/cache.h"

namespace specgen {

void speculation_cache::commit(int i, uint64_t round, int k, int32_t bonus) {
    ssd_branch& b = slots_[size_t(i)];
    b.round = round;
    b.k = k;
    b.bonus = bonus;
    n_ = i + 1;
}

int speculation_cache::find(uint64_t round, int k, int32_t bonus) const {
    int hit = -1;
    for (int i = 0; i < n_; ++i)
        if (slots_[size_t(i)].round == round && slots_[size_t(i)].k == k && slots_[size_t(i)].bonus == bonus) hit = i;
    return hit;
}

}  // namespace specgen
