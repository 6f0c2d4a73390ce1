#include "python/bindings.h"

NB_MODULE(_core, m) {
    using namespace specgen::python;
    m.doc() = "specgen native core (use the `specgen` package, not this module)";
    bind_errors(m);
    bind_params(m);
    bind_stats(m);
    bind_quant(m);
    bind_tokenizer(m);
    bind_sampling(m);
    bind_verify(m);
    bind_engine(m);
}
