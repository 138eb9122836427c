// wick.generate (wick/generate.h) and its stream: greedy or sampled text from a prompt, with the
// meanings and defaults of `wick generate` (generation_config.h), continuing from and updating a
// caller's State. Runs on a worker thread (stream.h) so that Ctrl-C cancels it cleanly.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "binding.h"
#include "generation_config.h"
#include "results.h"
#include "stream.h"
#include "wick/errors.h"

namespace wick::py_binding {

py::dict timings_dict(const GenerationResult& r) {
  const GenerationTimings& t = r.timings;
  py::dict d;
  d["prefill_ms"] = t.prefill_ms;
  d["decode_ms"] = t.decode_ms;
  d["sample_ms"] = t.sample_ms;
  d["decode_steps"] = t.decode_steps;
  d["prefill_tokens_per_s"] = t.prefill_ms > 0 ? 1000.0 * r.prompt_tokens / t.prefill_ms : 0.0;
  d["decode_tokens_per_s"] = t.decode_ms > 0 ? 1000.0 * t.decode_steps / t.decode_ms : 0.0;
  return d;
}

namespace {

// A generation in flight (wick.GenerationStream), and the bookkeeping that hands its final state
// back to the caller's wick.State once it has ended.
struct StreamBox {
  std::shared_ptr<GenerationRun> run;
  Model model;
  py::object state;  // the caller's wick.State (marked busy while the run uses it), or None
  std::string tokenizer_name;
  bool finalized = false;
  std::optional<GenerationResult> result;

  StreamBox(std::shared_ptr<GenerationRun> r, Model m, py::object s, std::string name)
      : run(std::move(r)), model(std::move(m)), state(std::move(s)), tokenizer_name(std::move(name)) {}
  StreamBox(StreamBox&&) = default;
  StreamBox& operator=(StreamBox&&) = delete;

  // Once the run has ended: the final state goes back into the caller's State (the state rule:
  // prompt and every returned token absorbed), and the result is kept. Returns the run's error.
  std::exception_ptr finalize() {
    if (finalized) return nullptr;
    finalized = true;
    const std::exception_ptr error = run->error();
    if (!state.is_none()) {
      StateBox& b = state.cast<StateBox&>();
      b.state = run->take_state();
      b.owner = model;
      const GenerationResult& r = run->result();
      if (error) b.n_tokens = -1;  // a failure after the prefill: partly absorbed
      else if (b.n_tokens >= 0) b.n_tokens += r.prompt_tokens + r.generated_tokens;
      // The logits and sampler of this generation travel with the state (unknown after a
      // failure).
      b.continuation = error ? Continuation{} : r.continuation;
      b.tokenizer = tokenizer_name;
      b.busy.store(false);
    }
    if (!error) result = run->result();
    return error;
  }

  // Cancels, waits for the end (GIL released) and hands the state back; never throws.
  void close() noexcept {
    if (!run || finalized) return;
    run->cancel();
    {
      py::gil_scoped_release release;
      run->chunks().wait_finished_blocking();
    }
    try {
      finalize();
    } catch (...) {
    }
  }

  ~StreamBox() {
    if (run && !finalized && PyGILState_Check()) close();
  }
};

py::object start_generation(const ModelBox& model, const py::object& tokenizer,
                            const py::object& prompt, int max_tokens, const SamplingArgs& sampling,
                            const py::object& stop, const py::object& stop_tokens,
                            py::object state, bool stream, bool penalize_prompt) {
  const bool seed_unset = sampling.seed.is_none();
  std::shared_ptr<const Tokenizer> tok =
      tokenizer.is_none()
          ? std::shared_ptr<const Tokenizer>(default_tokenizer_for_vocab(model.model.geometry().vocab))
          : object_arg<TokenizerBox>(tokenizer, "tokenizer", "a wick.Tokenizer or None").tokenizer;
  std::vector<int32_t> ids;
  if (PyUnicode_Check(prompt.ptr())) {
    const std::string text = prompt.cast<std::string>();
    py::gil_scoped_release release;
    ids = tok->encode(text);
  } else {
    ids = token_list(prompt, "generate(prompt)");
  }
  const GenerationConfig config = generation_config(max_tokens, sampling, stop, stop_tokens,
                                                    penalize_prompt, model.model.geometry().vocab);
  State start;
  Continuation from;
  if (state.is_none()) {
    start = model.model.new_state();
  } else {
    StateBox& b = object_arg<StateBox>(state, "generate(state)", "a wick.State or None");
    if (b.busy.exchange(true))
      throw InputError("this State is in use by another call (another thread?); give each "
                       "thread its own State (State.copy())");
    start = b.state;
    // An empty prompt goes on from the state's logits; its sampler resumes unless a seed is
    // given (the CLI's rule for --load-state without --seed).
    from = continue_with(b.continuation, config.sampling, /*resume_sampler=*/seed_unset);
  }
  auto run = std::make_shared<GenerationRun>(model.model, tok, std::move(ids), config,
                                             std::move(start), std::move(from), stream);
  StreamBox box(std::move(run), model.model, state, std::string(tok->name()));
  if (stream) return py::cast(std::move(box));

  const bool interrupted = box.run->chunks().wait_finished([&] { box.run->cancel(); });
  const std::exception_ptr error = box.finalize();
  if (interrupted) throw py::error_already_set();  // KeyboardInterrupt; the state is usable
  if (error) std::rethrow_exception(error);
  return py::cast(*box.result);
}

}  // namespace

void register_generate(py::module_& m) {
  py::class_<GenerationResult> result(m, "GenerationResult",
                                      "The outcome of wick.generate (the fields of `wick "
                                      "generate --json`).");
  add_result_fields(result, [](const GenerationResult& r) -> const GenerationResult& { return r; });
  result.def("__repr__", [](const GenerationResult& r) {
    return "wick.GenerationResult(stop_reason=" + std::string(stop_reason_name(r.stop_reason)) +
           ", prompt_tokens=" + std::to_string(r.prompt_tokens) +
           ", generated_tokens=" + std::to_string(r.generated_tokens) + ")";
  });

  py::class_<StreamBox>(m, "GenerationStream",
                        "Iterator of the text chunks (str) of a streamed wick.generate: complete "
                        "UTF-8 only, never a stop string; their concatenation is the result's "
                        "text. .result holds the GenerationResult once the iteration has ended.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__",
           [](StreamBox& b) -> py::str {
             if (b.finalized) throw py::stop_iteration();
             bool interrupted = false;
             std::optional<std::string> chunk =
                 b.run->chunks().pop([&] { b.run->cancel(); }, interrupted);
             if (interrupted) {
               b.finalize();
               throw py::error_already_set();
             }
             if (chunk) return py::str(*chunk);
             if (const std::exception_ptr error = b.finalize()) std::rethrow_exception(error);
             throw py::stop_iteration();
           })
      .def_property_readonly(
          "result",
          [](const StreamBox& b) -> py::object {
            return b.result ? py::cast(*b.result) : py::object(py::none());
          },
          "The GenerationResult once the stream is exhausted, else None.")
      .def("cancel", [](StreamBox& b) { b.run->cancel(); },
           "Asks the generation to stop at its next token (stop_reason \"cancelled\"); the "
           "iteration then ends.")
      .def("close", [](StreamBox& b) { b.close(); },
           "Cancels and waits for the end; the State (if any) is handed back usable.");

  m.def(
      "generate",
      [](const ModelBox& model, const py::object& tokenizer, const py::object& prompt,
         int max_tokens, float temperature, float top_p, int top_k, float presence_penalty,
         float frequency_penalty, float penalty_decay, float repetition_penalty,
         const py::object& seed, const py::object& stop, const py::object& stop_tokens,
         const py::object& state, const std::string& sampler, bool stream,
         const py::object& logit_bias, const py::object& ban, bool penalize_prompt) {
        // In SamplingArgs' member order (generation_config.h).
        const SamplingArgs s{sampler, temperature, top_p, top_k, presence_penalty,
                             frequency_penalty, penalty_decay, repetition_penalty, seed,
                             logit_bias, ban};
        return start_generation(model, tokenizer, prompt, max_tokens, s, stop, stop_tokens, state,
                                stream, penalize_prompt);
      },
      py::arg("model"), py::arg("tokenizer"), py::arg("prompt"), py::arg("max_tokens") = 128,
      py::arg("temperature") = 0.0, py::arg("top_p") = 1.0, py::arg("top_k") = 0,
      py::arg("presence_penalty") = 0.0, py::arg("frequency_penalty") = 0.0,
      py::arg("penalty_decay") = 1.0, py::arg("repetition_penalty") = 1.0,
      py::arg("seed") = py::none(), py::arg("stop") = py::none(),
      py::arg("stop_tokens") = py::none(), py::arg("state") = py::none(),
      py::arg("sampler") = "standard", py::arg("stream") = false,
      py::arg("logit_bias") = py::none(), py::arg("ban") = py::none(),
      py::arg("penalize_prompt") = false,
      R"doc(Generates text from `prompt` (str, or a list of token ids) with the meanings and
defaults of `wick generate`: equal arguments give the CLI's tokens and text.

tokenizer: a wick.Tokenizer (None: Tokenizer.for_model(model)). temperature 0 = greedy;
top_p (0, 1], top_k (0 = off), presence/frequency penalties, penalty_decay [0, 1],
repetition_penalty (CTRL, standard sampler only), seed (0 .. 2**64-1, the sampler's
SplitMix64 stream; None, the default, is 0 - or, when `state` carries the sampler of the
generation that produced it, that sampler resumed, as `wick generate --load-state` without
--seed does). sampler: "standard" or "chatrwkv" (ChatRWKV PIPELINE's order of operations
and space/digit exemption, with the values given here). stop: a str or list of str ended on and
cut from the text. stop_tokens: ids that end generation (None: the model's default, id 0 = end
of text on World-vocabulary models; [] = none). state: a wick.State to continue from; it is
updated IN PLACE to have absorbed the prompt and every returned token, and keeps the logits and
sampler of this generation, so a later call may pass an empty prompt ("" or []) and go on
exactly where this one stopped (10 + 10 tokens == 20). logit_bias {id: value},
ban [ids], penalize_prompt: as --logit-bias, --ban, --penalize-prompt.

Returns a wick.GenerationResult (.text, .tokens, .stop_reason, .prompt_tokens, .timings, ...);
with stream=True a wick.GenerationStream iterating the text chunks. The GIL is released while
generating; Ctrl-C (KeyboardInterrupt) cancels the generation and is raised once it has ended,
with the state usable. Raises wick.InputError (an empty prompt without state logits to continue from, invalid setting, ids outside the
vocabulary, a State of another geometry) and TypeError.)doc");
}

}  // namespace wick::py_binding
