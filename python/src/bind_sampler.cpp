// wick.Sampler (wick/sampler.h): token selection from a logits vector, for loops written in
// Python (the compat layer's PIPELINE is one). Owns its penalty history and SplitMix64 stream:
// the same settings, seed and logits give the same ids on every run. Not synchronised: one
// Sampler per generation (and per thread).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "binding.h"
#include "generation_config.h"
#include "wick/errors.h"

namespace wick::py_binding {

void register_sampler(py::module_& m) {
  py::class_<Sampler>(
      m, "Sampler",
      "Sampler(vocab, sampler=\"standard\", temperature=0, top_p=1, top_k=0, "
      "presence_penalty=0, frequency_penalty=0, penalty_decay=1, repetition_penalty=1, seed=0, "
      "logit_bias=None, ban=None, exempt_space_digits=True, tokenizer=None): the settings mean "
      "what they mean for wick.generate. \"chatrwkv\" follows ChatRWKV's PIPELINE (penalties "
      "with decay, top-p keeping ties, top-k, temperature after the cuts); its space/digit "
      "exemption needs the tokenizer. Raises wick.InputError for invalid settings.")
      .def(py::init([](int vocab, const std::string& sampler, float temperature, float top_p,
                       int top_k, float presence_penalty, float frequency_penalty,
                       float penalty_decay, float repetition_penalty, const py::object& seed,
                       const py::object& logit_bias, const py::object& ban,
                       bool exempt_space_digits, const py::object& tokenizer) {
             SamplingArgs a;
             a.sampler = sampler;
             a.temperature = temperature;
             a.top_p = top_p;
             a.top_k = top_k;
             a.presence_penalty = presence_penalty;
             a.frequency_penalty = frequency_penalty;
             a.penalty_decay = penalty_decay;
             a.repetition_penalty = repetition_penalty;
             a.seed = seed;
             a.logit_bias = logit_bias;
             a.ban = ban;
             SamplingConfig sc = sampling_config(a);
             Sampler::TokenBytes bytes;
             if (!tokenizer.is_none()) {
               std::shared_ptr<const Tokenizer> tok = object_arg<TokenizerBox>(tokenizer, "tokenizer", "a wick.Tokenizer or None").tokenizer;
               bytes = [tok](int32_t id) {
                 const int32_t one[1] = {id};
                 return tok->decode(one);
               };
             } else if (sc.mode == SamplerMode::kChatRwkv && exempt_space_digits) {
               throw InputError("Sampler: the chatrwkv sampler's space/digit exemption reads the "
                                "text of each token; pass tokenizer=... or "
                                "exempt_space_digits=False");
             }
             sc.exempt_space_digits = exempt_space_digits;
             return Sampler(std::move(sc), vocab, std::move(bytes));
           }),
           py::arg("vocab"), py::arg("sampler") = "standard", py::arg("temperature") = 0.0,
           py::arg("top_p") = 1.0, py::arg("top_k") = 0, py::arg("presence_penalty") = 0.0,
           py::arg("frequency_penalty") = 0.0, py::arg("penalty_decay") = 1.0,
           py::arg("repetition_penalty") = 1.0, py::arg("seed") = 0,
           py::arg("logit_bias") = py::none(), py::arg("ban") = py::none(),
           py::arg("exempt_space_digits") = true, py::arg("tokenizer") = py::none())
      .def(
          "select",
          [](Sampler& s, const py::object& logits) {
            const std::vector<float> v = float_vector(logits, "Sampler.select(logits)");
            // The GIL stays held (a select costs ~0.2 ms at V = 65536): it keeps two Python
            // threads from racing on one Sampler, which is not synchronised.
            return s.select(v);
          },
          py::arg("logits"),
          "Chooses one id from logits (float32 [V]) without recording it. Raises "
          "wick.InputError for a wrong size or when nothing is left to choose.")
      .def("observe", &Sampler::observe, py::arg("token"),
           "Adds a generated id to the penalty history.")
      .def(
          "observe_prompt",
          [](Sampler& s, const py::object& ids) {
            const std::vector<int32_t> v = token_list(ids, "Sampler.observe_prompt");
            s.observe_prompt(v);
          },
          py::arg("tokens"), "Prompt ids (standard sampler: enter the history in order).")
      .def("reset", &Sampler::reset, "Back to the seed and an empty history.")
      .def_property_readonly("vocab", &Sampler::vocab)
      .def_property_readonly("mode", [](const Sampler& s) {
        return std::string(sampler_mode_name(s.config().mode));
      });
}

}  // namespace wick::py_binding
