// A request's round state on the engine thread (engine/sequence.h).
#include "engine/sequence.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "common/error.h"
#include "engine/slot.h"
#include "engine/verify_trace.h"
#include "model/batch.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double now_seconds() { return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count(); }
double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
}  // namespace

sequence::sequence(const loaded_target& target, const std::vector<int32_t>& prompt, const generate_params& params)
    : target_(target), params_(params), history_(prompt), stream_(params.stop), rng_(params.seed),
      method_(target.params.verify == verify_mode::block ? verify_method::block : verify_method::token) {
    const tokenizer& tok = target_.tok;
    const int32_t n_vocab = target_.m.hp().n_vocab, n_ctx = target_.params.n_ctx;
    if (params_.add_bos && tok.add_bos() && tok.bos_id() >= 0 && (history_.empty() || history_[0] != tok.bos_id()))
        history_.insert(history_.begin(), tok.bos_id());
    if (history_.empty()) throw invalid_argument_error("empty prompt (and the model adds no BOS token)");
    for (int32_t t : history_)
        if (t < 0 || t >= n_vocab)
            throw invalid_argument_error("prompt token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab) + ")");
    if (int64_t(history_.size()) > n_ctx)
        throw context_overflow_error("prompt of " + std::to_string(history_.size()) + " tokens does not fit into n_ctx = " +
                                     std::to_string(n_ctx) + "; use a larger n_ctx or a shorter prompt");
    stats_.n_prompt_tokens = int64_t(history_.size());
}

// ---- admission and prefill ----------------------------------------------------------------------

void sequence::admit(slot& s, int n_cached, int n_sequences) {
    slot_ = &s;
    n_past_ = n_cached;
    stats_.n_prompt_tokens_cached = n_cached;
    t_admit_ = now_seconds();
    step_ = step_context{};
    step_.n_sequences = n_sequences;
    if (s.spec) {
        const speculation_request request{params_.sampling, params_.seed, method_, params_.max_tokens, n_cached};
        s.spec->begin(history_, request, step_, stats_);
    }
    if (!prefilling()) prefill_done(0, nullptr);
}

int sequence::add_prefill(batch& b, int max_rows) {
    const int m = std::min(max_rows, prompt_rows() - n_past_);
    if (m <= 0) return 0;
    row0_ = b.n_rows();
    b.add(slot_->index, history_.data() + n_past_, m, n_past_);
    return m;
}

void sequence::prefill_done(int m, const float* batch_hidden) {
    const int pos0 = n_past_;
    n_past_ += m;
    if (slot_->spec) {
        const float* hidden = m > 0 ? batch_hidden + size_t(row0_) * target_.m.hp().n_embd : nullptr;
        slot_->spec->observe(prefill_rows{pos0, m, hidden, !prefilling(), m > 0 ? features_at(row0_) : nullptr}, stats_);
    }
    if (prefilling()) return;
    stats_.prefill_seconds = now_seconds() - t_admit_;
    if (params_.max_tokens == 0) finish(finish_reason::length);
}

// ---- a round ------------------------------------------------------------------------------------

int sequence::draft_rows_behind() const {
    return slot_ && slot_->spec ? slot_->spec->draft_rows_behind(history_) : 0;
}

int64_t sequence::tokens_left() const {
    const int64_t budget = params_.max_tokens < 0 ? INT64_MAX : params_.max_tokens - int64_t(generated_.size());
    return std::min(budget, int64_t(target_.params.n_ctx) - n_past_);
}

void sequence::propose(int cap, int n_sequences, draft_batch* drafts) {
    proposal_.clear();
    gamma_ = 0;
    if (!slot_->spec) return;
    step_.n_sequences = n_sequences;  // also when the batch policy leaves it no draft this round
    step_.drafts = drafts;
    if (cap <= 0) return;
    // Drafts leave room for the corrected/bonus token.
    const int64_t max_n = std::max<int64_t>(0, std::min<int64_t>(tokens_left() - 1, int64_t(cap)));
    slot_->spec->propose(history_, int(max_n), step_, rng_, proposal_, stats_);
    gamma_ = int(proposal_.tokens.size());
}

int sequence::add_round_rows(batch& b) {
    gamma_ = int(proposal_.tokens.size());  // a batched draft completes the proposal after propose()
    batch_.assign(1, history_.back());  // pending
    batch_.insert(batch_.end(), proposal_.tokens.begin(), proposal_.tokens.begin() + gamma_);
    // Rows already forwarded (the hand-over, speculative/proposal.h): their keys and values are in the
    // slot and their hidden states are the target's own, so only the rest go through the layers.
    const int reused = std::min<int>(proposal_.n_forwarded, gamma_ + 1);
    stats_.n_target_rows_reused += reused;
    row0_ = -1;
    if (reused == gamma_ + 1) return 0;
    row0_ = b.n_rows();
    b.add(slot_->index, batch_.data() + reused, gamma_ + 1 - reused, n_past_ + reused);
    return gamma_ + 1 - reused;
}

const float* sequence::features_at(int row) const {
    const float* f = target_.eval.features();
    if (!f || row < 0) return nullptr;
    return f + size_t(row) * target_.eval.captured_layers().size() * size_t(target_.m.hp().n_embd);
}

const float* sequence::round_features() {
    const int reused = std::min<int>(proposal_.n_forwarded, gamma_ + 1);
    if (reused == 0) return features_at(row0_);
    // Hand-over rows bring their features from the drafter (host memory only, as the hand-over itself).
    const size_t width = target_.eval.captured_layers().size() * size_t(target_.m.hp().n_embd);
    if (width == 0 || !target_.be.host_memory() || proposal_.features.size() < size_t(reused) * width) return nullptr;
    features_.assign(proposal_.features.begin(), proposal_.features.begin() + ptrdiff_t(size_t(reused) * width));
    if (reused < gamma_ + 1) {
        const float* rest = features_at(row0_);
        if (!rest) return nullptr;
        features_.insert(features_.end(), rest, rest + size_t(gamma_ + 1 - reused) * width);
    }
    return features_.data();
}

void sequence::gather_hidden(const float* batch_hidden, float* out) const {
    const int E = target_.m.hp().n_embd;
    const int reused = std::min<int>(proposal_.n_forwarded, gamma_ + 1);
    if (reused > 0) std::memcpy(out, proposal_.hidden.data(), sizeof(float) * size_t(reused) * E);
    if (reused < gamma_ + 1)
        std::memcpy(out + size_t(reused) * E, batch_hidden + size_t(row0_) * E, sizeof(float) * size_t(gamma_ + 1 - reused) * E);
}

void sequence::check_reused_rows(const float* logits) {
    // Debug check (SPECGEN_CHECK_REUSE=1): the plain verification forward over the same rows must give
    // the same logits bit for bit. It rewrites the same cache rows, with the same values when it passes.
    const size_t n = size_t(gamma_ + 1) * target_.m.hp().n_vocab;
    evaluator& eval = target_.eval;
    eval.forward(target_.cache, batch_.data(), gamma_ + 1, n_past_, target_.m.hp().n_layer, slot_->index);
    check_logits_.resize(n);
    eval.logits(eval.hidden(), gamma_ + 1, check_logits_.data());
    if (std::memcmp(check_logits_.data(), logits, n * sizeof(float)) != 0)
        throw error("SPECGEN_CHECK_REUSE: the target rows computed from the drafter's hidden states differ from a "
                    "verification forward at position " + std::to_string(n_past_));
}

void sequence::finish_round(const float* logits) {
    const int gamma = gamma_, n_vocab = target_.m.hp().n_vocab;
    if (target_.check_reuse && proposal_.n_forwarded > 0) check_reused_rows(logits);
    const auto t_verify = clock_type::now();

    // p_1..p_{g+1}: row i's penalty history is the context it was computed in: history + x_1..x_i.
    if (int(p_.size()) < gamma + 1) p_.resize(gamma + 1);
    history_.insert(history_.end(), batch_.begin() + 1, batch_.end());
    for (int i = 0; i <= gamma; ++i)
        processor_.process(logits + size_t(i) * n_vocab, nullptr, n_vocab, params_.sampling, history_.data(),
                           history_.size() - gamma + i, p_[i]);
    history_.resize(history_.size() - gamma);

    // Verify: keep x_1..x_k and one corrected/bonus token y.
    const verify_result vr = target_.verify.verify(method_, proposal_.tokens.data(), gamma, p_.data(),
                                                   proposal_.q.data(), rng_, &row_stats_);
    stats_.verify_seconds += seconds_since(t_verify);
    if (target_.trace && slot_->spec)
        target_.trace->record(target_.verify, method_, proposal_.tokens.data(), gamma, p_.data(), proposal_.q.data(), vr);
    if (slot_->spec) {
        stats_.n_rounds += 1;
        stats_.n_drafted += gamma;
        stats_.n_accepted += vr.n_accepted;
        if (int(stats_.drafted_at.size()) < gamma) {
            stats_.drafted_at.resize(gamma, 0);
            stats_.accepted_at.resize(gamma, 0);
        }
        for (int i = 0; i < gamma; ++i) stats_.drafted_at[i] += 1;
        for (int i = 0; i < vr.n_accepted; ++i) stats_.accepted_at[i] += 1;
    }
    for (const auto& rs : row_stats_) {
        stats_.n_target_rows += 1;
        stats_.sum_entropy += rs.entropy;
        stats_.sum_entropy2 += rs.entropy_sq;
        if (rs.alpha == rs.alpha) {  // NaN for the bonus row
            stats_.sum_alpha += rs.alpha;
            stats_.n_alpha += 1;
        }
    }

    // Observe: the speculator learns the verdict (draft length, vocabulary, SSD's next round).
    if (slot_->spec)
        // Captured features: of the rows this step forwarded, and of the hand-over rows when the drafter captured them.
        slot_->spec->observe(verify_outcome{proposal_.tokens.data(), gamma, vr.n_accepted, vr.next_token, logits, n_vocab,
                                            round_features()},
                             step_, stats_);

    // Commit: the slot now holds pending and x_1..x_k; y becomes the new pending token.
    n_past_ += 1 + vr.n_accepted;
    bool go = true;
    for (int i = 0; i <= vr.n_accepted && go; ++i) {
        // Accepted draft i was emitted by row i, the corrected/bonus token by row k (engine/logprobs.h).
        const int32_t token = i < vr.n_accepted ? proposal_.tokens[i] : vr.next_token;
        const size_t n_before = generated_.size();
        token_logprob lp;
        if (params_.logprobs >= 0)
            lp = logprob_recorder_.record(logits + size_t(i) * n_vocab, n_vocab, p_[i], params_.sampling,
                                          history_.data(), history_.size(), token, params_.logprobs);
        go = emit(token) != 0;
        if (params_.logprobs >= 0 && generated_.size() > n_before) logprobs_.push_back(std::move(lp));
    }
    if (go && n_past_ >= target_.params.n_ctx) finish(finish_reason::length);
}

int sequence::emit(int32_t token) {
    const tokenizer& tok = target_.tok;
    if (!params_.ignore_eos && tok.is_eog(token)) {
        finish(finish_reason::eos);
        return 0;
    }
    history_.push_back(token);
    generated_.push_back(token);
    stats_.n_generated += 1;
    out_ += stream_.push(tok.token_bytes(token));
    if (stream_.stopped()) {
        finish(finish_reason::stop);
        return 0;
    }
    if (params_.max_tokens >= 0 && int64_t(generated_.size()) >= params_.max_tokens) {
        finish(finish_reason::length);
        return 0;
    }
    return 1;
}

void sequence::finish(finish_reason r) {
    if (reason_ != finish_reason::none) return;
    reason_ = r;
    out_ += stream_.finish();
}

slot* sequence::leave_slot() {
    slot* s = slot_;
    if (s && s->spec) s->spec->end();  // joins SSD's drafter thread
    slot_ = nullptr;
    return s;
}

}  // namespace specgen
