// The head service: the target's LM head as a speculator uses it, handed to every speculator when it is
// built (speculative/speculator.h). NanoSpec seeds its draft vocabulary S from the target's top-k ids at
// the last prompt rows (docs/ALGORITHMS.md section 3); this is where those ids come from.
//
// Built once per generator over the target's evaluator; called on the engine thread only (the
// speculators' begin/propose/observe run there, between the evaluator's forwards).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace specgen {

class evaluator;
class draft_vocab;
class tokenizer;
struct backend;
struct generator_params;

class target_head {
public:
    // eval: the target's evaluator (its full head); seed: the ids top_ids() ranks over, as a static
    // draft_vocab over the target's head (make_seed_vocab), or null for every id.
    target_head(evaluator& eval, backend& be, std::unique_ptr<draft_vocab> seed);
    ~target_head();

    int n_embd() const { return n_embd_; }
    // Whether the hidden rows top_ids() takes are host memory (the backend's), so a caller may copy them.
    bool host_memory() const;
    // The target's k best ids of each of n hidden rows, best first (ties: lowest id), ranked over the seed
    // ids when there are some, else over the full head.  hidden: the target's output-normed rows in backend
    // memory [n, n_embd]; out: [n, k]
    void top_ids(const float* hidden, int n, int k, int32_t* out);
    // What top_ids() costs per row as a share of the full head's rows (its ids / n_vocab; 1: every id).
    double top_ids_share() const { return share_; }
    // The ids top_ids() ranks over (empty: every id).
    std::vector<int32_t> seed_ids() const;

private:
    static constexpr int kRowsPerPass = 16;  // rows per head pass: bounds the scratch logits
    evaluator& eval_;
    backend& be_;
    std::unique_ptr<draft_vocab> seed_;
    int n_embd_, n_vocab_;
    double share_;
    std::vector<float> scratch_;  // [kRowsPerPass, columns] logits
};

// The head service of a generator's speculators: its seed ids are NanoSpec's prompt seed head
// (make_seed_vocab, speculative/draft_vocab.h) when params seed S, else every id.
std::unique_ptr<target_head> make_target_head(const generator_params& params, evaluator& eval, backend& be,
                                              const tokenizer& tok);

}  // namespace specgen
