// wick.Engine (wick/engine.h): the serving engine with continuous batching, for programs that run
// many generations at once (any number of Python threads may submit and stream concurrently).
//
// Each request streams its chunks into its own C++ queue (stream.h); the engine thread never
// touches Python. Iterating a request, or waiting for its result, releases the GIL and turns
// Ctrl-C into a cancel of that request (the KeyboardInterrupt is raised once it has ended).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>

#include "binding.h"
#include "generation_config.h"
#include "results.h"
#include "stream.h"
#include "wick/engine.h"
#include "wick/errors.h"

namespace wick::py_binding {
namespace {

struct EngineBox {
  EngineBox(Model m, std::shared_ptr<const Tokenizer> t) : model(std::move(m)), tokenizer(std::move(t)) {}
  Model model;
  std::shared_ptr<const Tokenizer> tokenizer;  // outlives the engine (declared first)
  std::unique_ptr<Engine> engine;

  Engine& get() {
    if (!engine) throw EngineStoppedError("this wick.Engine was closed");
    return *engine;
  }
  // Cancels everything and joins the engine thread (GIL released: the engine never needs it).
  void close() {
    if (!engine) return;
    py::gil_scoped_release release;
    engine.reset();
  }
  ~EngineBox() {
    if (engine && PyGILState_Check()) close();
  }
};

// A finished request's result, with the model its state belongs to.
struct EngineResultBox {
  EngineResult result;
  Model model;
  int64_t start_tokens = 0;  // tokens the initial state had absorbed (-1 unknown)
};

struct RequestBox {
  RequestHandle handle;
  std::shared_ptr<ChunkQueue> queue;
  py::object engine;  // keeps the wick.Engine alive while its requests are used
  Model model;
  int64_t start_tokens = 0;

  // Waits (interruptibly) for the end; on Ctrl-C cancels and raises once ended.
  const EngineResult& wait() {
    if (queue->wait_finished([this] { handle.cancel(); })) throw py::error_already_set();
    py::gil_scoped_release release;
    return handle.wait();  // on_done has run: returns at once
  }
};

const GenerationResult& result_of(const EngineResultBox& b) { return b.result; }

}  // namespace

void register_engine(py::module_& m) {
  py::class_<EngineResultBox> result(m, "EngineResult",
                                     "The outcome of a wick.Engine request: the fields of "
                                     "GenerationResult plus the engine's own.");
  add_result_fields(result, result_of);
  result
      .def_property_readonly("cached_tokens",
                             [](const EngineResultBox& b) { return b.result.cached_tokens; },
                             "Prompt tokens served from the prefix cache instead of prefilled.")
      .def_property_readonly("queue_ms", [](const EngineResultBox& b) { return b.result.queue_ms; })
      .def_property_readonly("ttft_ms", [](const EngineResultBox& b) { return b.result.ttft_ms; },
                             "Submit to first generated token, ms.")
      .def_property_readonly("total_ms", [](const EngineResultBox& b) { return b.result.total_ms; })
      .def_property_readonly(
          "state",
          [](const EngineResultBox& b) -> py::object {
            if (b.result.state.empty()) return py::none();
            const int64_t n = b.start_tokens < 0
                                  ? -1
                                  : b.start_tokens + b.result.prompt_tokens + b.result.generated_tokens;
            StateBox box(b.result.state, b.model, n);
            box.continuation = b.result.continuation;
            return py::cast(std::move(box));
          },
          "A new wick.State: the row's final state (prompt and every returned token absorbed), "
          "or None for a request that never started.");

  py::class_<RequestBox>(m, "Request",
                         "A submitted request: iterate it for its text chunks (str), "
                         "result() for the EngineResult, cancel() to end it. Thread-safe.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__",
           [](RequestBox& b) -> py::str {
             bool interrupted = false;
             std::optional<std::string> chunk =
                 b.queue->pop([&] { b.handle.cancel(); }, interrupted);
             if (interrupted) throw py::error_already_set();
             if (chunk) return py::str(*chunk);
             const EngineResult& r = b.wait();
             if (r.stop_reason == StopReason::kError && r.exception)
               std::rethrow_exception(r.exception);
             throw py::stop_iteration();
           })
      .def(
          "result",
          [](RequestBox& b) {
            const EngineResult& r = b.wait();
            if (r.stop_reason == StopReason::kError && r.exception)
              std::rethrow_exception(r.exception);
            return EngineResultBox{r, b.model, b.start_tokens};
          },
          "Waits for the end (GIL released; Ctrl-C cancels the request) and returns the "
          "EngineResult. A request that failed raises its error (e.g. wick.InputError).")
      .def("cancel", [](RequestBox& b) { b.handle.cancel(); },
           "Ends the request (stop_reason \"cancelled\"); no effect once done.")
      .def_property_readonly("done", [](const RequestBox& b) { return b.queue->finished(); })
      .def_property_readonly("id", [](const RequestBox& b) { return b.handle.id(); });

  py::class_<EngineBox>(
      m, "Engine",
      "The serving engine: continuous batching of requests submitted from any thread. Each "
      "request's tokens, text and final state equal a solo wick.generate with the same "
      "arguments (batch invariance). Engine(model, tokenizer=None, max_rows=16, "
      "queue_length=256, prefill_chunk=256, cache_mib=256).")
      .def(py::init([](const ModelBox& model, const py::object& tokenizer, int max_rows,
                       int queue_length, int prefill_chunk, double cache_mib) {
             EngineOptions o;
             o.max_rows = max_rows;
             o.queue_length = queue_length;
             o.prefill_chunk = prefill_chunk;
             o.prefill_chunk_idle = std::max(o.prefill_chunk_idle, prefill_chunk);
             if (!(cache_mib >= 0))
               throw InputError("cache_mib must be >= 0, got " + std::to_string(cache_mib));
             o.cache_bytes = static_cast<size_t>(cache_mib * 1024.0 * 1024.0);
             std::shared_ptr<const Tokenizer> tok =
                 tokenizer.is_none() ? std::shared_ptr<const Tokenizer>(
                                           default_tokenizer_for_vocab(model.model.geometry().vocab))
                                     : object_arg<TokenizerBox>(tokenizer, "tokenizer", "a wick.Tokenizer or None").tokenizer;
             auto box = std::make_unique<EngineBox>(model.model, tok);
             box->engine = std::make_unique<Engine>(model.model, *tok, o);
             return box;
           }),
           py::arg("model"), py::arg("tokenizer") = py::none(), py::arg("max_rows") = 16,
           py::arg("queue_length") = 256, py::arg("prefill_chunk") = 256,
           py::arg("cache_mib") = 256.0)
      .def(
          "submit",
          [](py::object self, const py::object& prompt, int max_tokens, float temperature,
             float top_p, int top_k, float presence_penalty, float frequency_penalty,
             float penalty_decay, float repetition_penalty, const py::object& seed,
             const py::object& stop, const py::object& stop_tokens, const py::object& state,
             const std::string& sampler, const py::object& logit_bias, const py::object& ban,
             bool penalize_prompt) {
            EngineBox& e = self.cast<EngineBox&>();
            Engine& engine = e.get();
            // In SamplingArgs' member order (generation_config.h).
            const SamplingArgs s{sampler, temperature, top_p, top_k, presence_penalty,
                                 frequency_penalty, penalty_decay, repetition_penalty, seed,
                                 logit_bias, ban};
            Request q;
            if (PyUnicode_Check(prompt.ptr())) q.prompt = prompt.cast<std::string>();
            else q.prompt_tokens = token_list(prompt, "Engine.submit(prompt)");
            q.config = generation_config(max_tokens, s, stop, stop_tokens, penalize_prompt,
                                         e.model.geometry().vocab);
            int64_t start_tokens = 0;
            if (!state.is_none()) {
              const StateBox& b = object_arg<StateBox>(state, "state", "a wick.State or None");
              q.initial_state = b.state;
              q.continuation = continue_with(b.continuation, q.config.sampling,
                                             /*resume_sampler=*/seed.is_none());
              start_tokens = b.n_tokens;
            }
            auto queue = std::make_shared<ChunkQueue>();
            q.on_chunk = [queue](std::string_view chunk, int32_t) {
              queue->push(chunk);
              return true;
            };
            q.on_done = [queue](const EngineResult&) { queue->finish(); };
            RequestHandle h;
            {
              py::gil_scoped_release release;
              h = engine.submit(std::move(q));
            }
            return RequestBox{h, queue, self, e.model, start_tokens};
          },
          py::arg("prompt"), py::arg("max_tokens") = 128, py::arg("temperature") = 0.0,
          py::arg("top_p") = 1.0, py::arg("top_k") = 0, py::arg("presence_penalty") = 0.0,
          py::arg("frequency_penalty") = 0.0, py::arg("penalty_decay") = 1.0,
          py::arg("repetition_penalty") = 1.0, py::arg("seed") = py::none(), py::arg("stop") = py::none(),
          py::arg("stop_tokens") = py::none(), py::arg("state") = py::none(),
          py::arg("sampler") = "standard", py::arg("logit_bias") = py::none(),
          py::arg("ban") = py::none(), py::arg("penalize_prompt") = false,
          "Queues a generation (the arguments of wick.generate; `state` is copied, the final "
          "state is the result's .state) and returns a wick.Request at once. Raises "
          "wick.QueueFullError when the queue is full, wick.EngineStoppedError after shutdown, "
          "wick.InputError for invalid arguments.")
      .def(
          "cancel", [](EngineBox&, RequestBox& r) { r.handle.cancel(); }, py::arg("request"),
          "Same as request.cancel().")
      .def(
          "shutdown",
          [](EngineBox& e, double grace_s, bool cancel) {
            Engine& engine = e.get();
            py::gil_scoped_release release;
            engine.shutdown(std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000)),
                            cancel);
          },
          py::arg("grace_s") = 10.0, py::arg("cancel") = false,
          "Stops accepting requests and waits for the running ones (cancelled after grace_s).")
      .def("close", [](EngineBox& e) { e.close(); },
           "Cancels every request and stops the engine thread.")
      .def("stats", [](EngineBox& e) {
        const EngineStats s = e.get().stats();
        py::dict d;
        d["submitted"] = s.submitted;
        d["completed"] = s.completed;
        d["refused"] = s.refused;
        d["queued"] = s.queued;
        d["running"] = s.running;
        d["iterations"] = s.iterations;
        d["pass_ms"] = s.pass_ms;
        d["busy_ms"] = s.busy_ms;
        d["prompt_tokens"] = s.prompt_tokens;
        d["cached_tokens"] = s.cached_tokens;
        return d;
      }, "Counters of the engine (requests, passes, cache).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](EngineBox& e, const py::object&, const py::object&, const py::object&) {
        e.close();
      });
}

}  // namespace wick::py_binding
