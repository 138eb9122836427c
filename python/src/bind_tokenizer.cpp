// wick.Tokenizer (wick/tokenizer.h): text <-> token ids. Immutable; safe to use from any number
// of Python threads (encode/decode release the GIL for long inputs).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "binding.h"
#include "wick/errors.h"

namespace wick::py_binding {
namespace {

// str -> its UTF-8 bytes; bytes -> as they are. TypeError otherwise.
std::string text_bytes(const py::handle& obj) {
  if (PyUnicode_Check(obj.ptr())) {
    Py_ssize_t n = 0;
    const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &n);
    if (!data) throw py::error_already_set();  // lone surrogates cannot be UTF-8
    return std::string(data, static_cast<size_t>(n));
  }
  if (PyBytes_Check(obj.ptr())) return obj.cast<std::string>();
  throw py::type_error(std::string("Tokenizer.encode: expected str or bytes, got ") +
                       Py_TYPE(obj.ptr())->tp_name);
}

}  // namespace

void register_tokenizer(py::module_& m) {
  py::class_<TokenizerBox, std::shared_ptr<TokenizerBox>>(
      m, "Tokenizer",
      "Text <-> token ids. Tokenizer(path): a World vocabulary (.txt, rwkv_vocab_v20230424 "
      "format) or a HuggingFace tokenizer.json (byte-level BPE), chosen by the file name. "
      "Raises wick.FileError / wick.FormatError. Immutable and thread-safe.")
      .def(py::init([](const py::object& path) {
             const std::string p = path_arg(path, "Tokenizer(path)");
             std::unique_ptr<Tokenizer> t;
             {
               py::gil_scoped_release release;
               t = load_tokenizer(p);
             }
             return std::make_shared<TokenizerBox>(TokenizerBox{std::move(t)});
           }),
           py::arg("path"))
      .def_static(
          "for_model",
          [](const ModelBox& model) {
            return std::make_shared<TokenizerBox>(
                TokenizerBox{default_tokenizer_for_vocab(model.model.geometry().vocab)});
          },
          py::arg("model"),
          "The default tokenizer for the model's vocabulary: byte-level for 256 ids, the "
          "embedded World vocabulary for 65536. Raises wick.InputError for other sizes (give a "
          "tokenizer file).")
      .def_static(
          "world",
          [] { return std::make_shared<TokenizerBox>(TokenizerBox{default_world_tokenizer()}); },
          "The World vocabulary embedded in wick (rwkv_vocab_v20230424).")
      .def(
          "encode",
          [](const TokenizerBox& t, const py::object& text) {
            const std::string bytes = text_bytes(text);
            py::gil_scoped_release release;
            return t.tokenizer->encode(bytes);
          },
          py::arg("text"), "Token ids (list[int]) of a str (its UTF-8 bytes) or of bytes.")
      .def(
          "decode",
          [](const TokenizerBox& t, const py::object& ids) {
            const std::vector<int32_t> v = token_list(ids, "Tokenizer.decode");
            std::string text;
            {
              py::gil_scoped_release release;
              text = utf8_replace_invalid(t.tokenizer->decode(v));
            }
            return py::str(text);
          },
          py::arg("ids"),
          "The text of the ids (str). Bytes that are not valid UTF-8 (a character cut between "
          "tokens) become U+FFFD, as bytes.decode('utf-8', 'replace') does. Raises "
          "wick.InputError for an id the tokenizer does not have.")
      .def(
          "decode_bytes",
          [](const TokenizerBox& t, const py::object& ids) {
            const std::vector<int32_t> v = token_list(ids, "Tokenizer.decode_bytes");
            std::string bytes;
            {
              py::gil_scoped_release release;
              bytes = t.tokenizer->decode(v);
            }
            return py::bytes(bytes);
          },
          py::arg("ids"), "The raw bytes of the ids, concatenated (may end inside a character).")
      .def_property_readonly("vocab_size",
                             [](const TokenizerBox& t) { return t.tokenizer->vocab_size(); },
                             "One past the largest id the tokenizer produces.")
      .def_property_readonly(
          "name", [](const TokenizerBox& t) { return std::string(t.tokenizer->name()); },
          "\"byte-level\", \"world\" or the BPE tokenizer's name.")
      .def("__repr__", [](const TokenizerBox& t) {
        return "wick.Tokenizer(" + std::string(t.tokenizer->name()) + ", vocab_size=" +
               std::to_string(t.tokenizer->vocab_size()) + ")";
      });
}

}  // namespace wick::py_binding
