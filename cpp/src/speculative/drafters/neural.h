// Drafters that run a transformer: a separate draft model ("model") or the target's own first L
// layers ("self", early exit). One loader (neural_weights) and one draft loop (neural_drafter),
// used by the sequential drafter (neural.cpp) and composed by the SSD speculator
// (speculative/ssd/ssd.h), which adds its candidates, Saguaro sampling and interruption through the
// hooks of draft().
//
// Both draft autoregressively: forward one token, head, the same logits processors as the target,
// sample. The head is the full LM head, or with NanoSpec / FR-Spec (docs/ALGORITHMS.md section 3) the
// rows of a token set S gathered into W_S (speculative/draft_vocab.h): draft logits over S only, and
// the proposal q_S is the processed distribution over S (zero outside it; the verifier's residual
// covers the rest).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/params.h"
#include "model/model.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"

namespace specgen {

class gguf_file;
class tokenizer;
class draft_vocab;
struct backend;

// The weights a neural drafter runs (params.draft "self" or a draft GGUF path).
struct neural_weights {
    std::shared_ptr<const gguf_file> file;  // null for "self"
    std::unique_ptr<model> own;             // the draft GGUF's model; null for "self"
    const model* m = nullptr;               // the target (self) or *own
    int n_layers = 0;                       // layers run per token
    // Self over every layer: the drafter's rows (hidden states, KV) are the target's own.
    bool is_target = false;
};

// Loads the drafter of `params` for `target`: "self" checks self_layers (0 = all layers), a path loads
// the GGUF and checks its vocabulary against the target's (model/vocab_compat.h). Throws
// invalid_argument_error for "", "ngram" or a bad self_layers. The weights are immutable once loaded:
// several drafters (one per slot, speculator_factory) may share them.
std::shared_ptr<const neural_weights> load_neural_weights(const generator_params& params, const model& target,
                                                          const tokenizer& target_tok);
// Draft GGUFs load_neural_weights() has loaded in this process (a generator loads its draft model once,
// whatever its n_parallel: tests/cpp/test_draft_sharing.cpp).
int64_t draft_model_loads();

class neural_drafter {
public:
    // Returns true to stop (then forward() / draft() return false, the cache keeps what it holds).
    using abort_check = std::function<bool()>;
    // Called once per drafted position i with the head's raw logits [n_logits] (over ids when not
    // null) and q, already the processed distribution: may record from the logits and replace q by
    // the distribution to sample from (Saguaro).
    using position_hook = std::function<void(int i, const float* logits, int n_logits, const int32_t* ids, token_dist& q)>;

    // w: the weights (must outlive this); cache: the KV cache it writes; vocab: the draft head's set S
    // (null: full head; owned by the caller). follows_target: the cache is the target's, which holds
    // history[0 .. n-2] for our layers at every draft() (self, sequential); otherwise the rows it
    // holds are tracked and every forward keeps only the longest common prefix with its context.
    // seq: the sequence (slot) of `cache` it writes (the self drafter: its request's slot of the target cache).
    neural_drafter(const model& m, int n_layers, kv_cache& cache, backend& be, draft_vocab* vocab, bool follows_target,
                   int seq = 0);

    // Forget the cached rows (a forward stopped half-way leaves rows it cannot vouch for).
    void reset() { cached_.clear(); }
    int n_logits() const;            // the head's width: |S| or n_vocab
    const int32_t* ids() const;      // S's ids (row k of the head is token ids()[k]), or null
    int n_ctx() const;
    double head_seconds = 0;         // time in the head, accumulated by head()

    // Forwards the rows of ctx the cache lacks; for each row index r in `rows` (ascending, < ctx.size()):
    // writes the head's logits into logits(i) (when head) and appends its hidden state to hidden_out
    // (when not null). The last row of ctx is always forwarded.
    bool forward(const std::vector<int32_t>& ctx, const std::vector<int>& rows, const abort_check* abort,
                 std::vector<float>* hidden_out, bool head);
    const std::vector<float>& logits(size_t i) const { return logits_rows_[i]; }
    // The head of one hidden state [n_embd] into logits(slot).
    void head(const float* hidden, size_t slot);

    // Capture these layers' inputs (evaluator::capture_layers) of the rows draft() hands over: features().
    void capture_layers(const std::vector<int>& layers) { eval_.capture_layers(layers); }
    // The captured inputs of the rows the last draft() appended to `hidden`, [rows, width] (empty: none).
    const std::vector<float>& features() const { return features_; }

    // Drafts up to n tokens after ctx (its last token not yet forwarded), sampled with sp and gen;
    // stops early when the top probability of the head's softmax falls below p_min. tokens/q: x_i and
    // the distribution it was sampled from. hidden (not null): the hidden states of every row it
    // forwarded, [ctx's last token, x_1..x_{m-1}] (m = tokens drafted), and x_m's too when
    // forward_last (the SSD hand-over: the verification then forwards nothing).
    bool draft(const std::vector<int32_t>& ctx, int n, float p_min, const sampling_params& sp, rng& gen,
               std::vector<int32_t>& tokens, std::vector<token_dist>& q, std::vector<float>* hidden,
               bool forward_last, const position_hook* hook, const abort_check* abort);

    kv_cache& cache() { return cache_; }
    const model& weights() const { return m_; }
    int seq() const { return seq_; }
    int n_layers() const { return n_layers_; }
    bool full_head() const { return vocab_ == nullptr; }

    // ---- batched drafting (speculative/draft_batch.h runs the forwards, this drafter the rest) ----
    // The rows of ctx the cache still holds (the longest common prefix, at most ctx.size() - 1); forgets
    // the rest: the caller forwards ctx[keep_prefix(ctx)..] and reports it with forwarded().
    int keep_prefix(const std::vector<int32_t>& ctx);
    // The rows of ctx its own cache holds already (0 when it follows the target's cache).
    int rows_cached(const std::vector<int32_t>& ctx) const;
    // The rows of ctx before its last that keep_prefix(ctx) would leave to forward (it forgets nothing).
    int rows_behind(const std::vector<int32_t>& ctx) const;
    void forwarded(const int32_t* tokens, int n) { cached_.insert(cached_.end(), tokens, tokens + n); }
    // The cache's rows now hold tokens[0..n) (copied in from another sequence), nothing after them.
    void replace_cached(const int32_t* tokens, int n) { cached_.assign(tokens, tokens + n); }
    // q = the processed distribution of the head's logits [n_logits()] after context ctx (as draft()).
    void process(const float* logits, const sampling_params& sp, const std::vector<int32_t>& ctx, token_dist& q) {
        processor_.process(logits, ids(), n_logits(), sp, ctx.data(), ctx.size(), q);
    }

private:
    // The longest common prefix of ctx and the rows the cache holds, at most ctx.size() - 1.
    int cached_prefix(const std::vector<int32_t>& ctx) const;

    const model& m_;
    int n_layers_;
    kv_cache& cache_;
    backend& be_;
    evaluator eval_;
    draft_vocab* vocab_;
    bool follows_target_;
    int seq_ = 0;
    std::vector<int32_t> cached_;     // tokens whose KV rows the cache holds (a prefix), unless follows_target_
    std::vector<int32_t> work_;       // draft()'s context: ctx + drafted tokens
    std::vector<std::vector<float>> logits_rows_;
    logits_processor processor_;
    std::vector<float> features_;     // capture_layers(): the handed-over rows' features
};

}  // namespace specgen
