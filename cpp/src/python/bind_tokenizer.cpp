// specgen._core.Tokenizer: the GGUF tokenizer on its own, for tests and tools (the engine owns its
// own instance). encode/decode release the GIL.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "gguf/gguf_reader.h"
#include "python/bindings.h"
#include "tokenizer/tokenizer.h"

namespace nb = nanobind;

namespace specgen::python {

namespace {

std::unique_ptr<tokenizer> load_tokenizer(const std::string& path) {
    gguf_file f(path);  // unmapped again once the tokenizer has copied what it needs
    return std::make_unique<tokenizer>(f);
}

}  // namespace

void bind_tokenizer(nb::module_& m) {
    nb::class_<tokenizer>(m, "Tokenizer",
                          "The tokenizer stored in a GGUF file (tokenizer.ggml.* metadata).")
        .def("__init__",
             [](tokenizer* self, const std::filesystem::path& path) {
                 std::unique_ptr<tokenizer> t;
                 {
                     nb::gil_scoped_release nogil;
                     t = load_tokenizer(path.string());
                 }
                 new (self) tokenizer(std::move(*t));
             },
             nb::arg("path"), "Loads the tokenizer of the GGUF file at `path` (str or os.PathLike).")
        .def("encode",
             [](const tokenizer& t, const std::string& text, bool add_special, bool parse_special) {
                 std::vector<int32_t> ids;
                 {
                     nb::gil_scoped_release nogil;
                     ids = t.encode(text, add_special, parse_special);
                 }
                 return ids;
             },
             nb::arg("text"), nb::arg("add_special") = true, nb::arg("parse_special") = false,
             "Token ids of `text`. add_special: BOS/EOS as the file says; parse_special: match "
             "control tokens written as text.")
        .def("encode",
             [](const tokenizer& t, nb::bytes text, bool add_special, bool parse_special) {
                 std::string s(text.c_str(), text.size());
                 std::vector<int32_t> ids;
                 {
                     nb::gil_scoped_release nogil;
                     ids = t.encode(s, add_special, parse_special);
                 }
                 return ids;
             },
             nb::arg("text"), nb::arg("add_special") = true, nb::arg("parse_special") = false,
             "Token ids of raw bytes (need not be valid UTF-8; every byte is kept).")
        .def("decode",
             [](const tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
                 std::string s;
                 {
                     nb::gil_scoped_release nogil;
                     s = t.decode(ids, skip_special);
                 }
                 // Ids can end inside a UTF-8 sequence; such bytes become U+FFFD.
                 PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
                 if (!o) throw nb::python_error();
                 return nb::steal<nb::str>(o);
             },
             nb::arg("ids"), nb::arg("skip_special") = false,
             "Text of `ids` (invalid UTF-8 replaced by U+FFFD). Raises InvalidParameterError on an "
             "id outside the vocabulary.")
        .def("decode_bytes",
             [](const tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
                 std::string s;
                 {
                     nb::gil_scoped_release nogil;
                     s = t.decode(ids, skip_special);
                 }
                 return nb::bytes(s.data(), s.size());
             },
             nb::arg("ids"), nb::arg("skip_special") = false, "Raw bytes of `ids`.")
        .def("token_bytes",
             [](const tokenizer& t, int32_t id) {
                 const std::string& s = t.token_bytes(id);
                 return nb::bytes(s.data(), s.size());
             },
             nb::arg("id"), "Bytes token `id` contributes to decoded text.")
        .def("token_text", &tokenizer::token_text, nb::arg("id"), "The token as the file spells it.")
        .def("is_eog", &tokenizer::is_eog, nb::arg("id"), "End of generation (eos, eot, <end_of_turn>, ...).")
        .def("is_control", &tokenizer::is_control, nb::arg("id"))
        .def_prop_ro("n_vocab", &tokenizer::n_vocab)
        .def_prop_ro("bos_id", &tokenizer::bos_id, "-1 if none")
        .def_prop_ro("eos_id", &tokenizer::eos_id, "-1 if none")
        .def_prop_ro("add_bos", &tokenizer::add_bos)
        .def_prop_ro("add_eos", &tokenizer::add_eos)
        .def_prop_ro("eog_ids", &tokenizer::eog_ids)
        .def_prop_ro("model", &tokenizer::model_name, "'llama' (SentencePiece) or 'gpt2' (byte-level BPE)")
        .def_prop_ro("pre", &tokenizer::pre_name, "tokenizer.ggml.pre");
}

}  // namespace specgen::python
