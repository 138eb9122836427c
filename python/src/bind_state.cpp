// wick.State (wick/state.h, wick/state_file.h): the recurrent state of one context.
//
// A State is a value: state.copy() (or copy.copy / copy.deepcopy) takes a snapshot; passes advance
// a State in place. Views (wkv(i), att_shift(i), ffn_shift(i)) are float32 arrays over the State's
// own memory: writing them changes the state; they stay valid as long as any of them or the State
// lives. Not synchronised: one State is used by one call at a time (a second concurrent call on it
// raises wick.InputError instead of racing).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "binding.h"
#include "wick/errors.h"
#include "wick/state_file.h"
#include "wick/tuned_state.h"

namespace wick::py_binding {

StateUse::StateUse(StateBox& box) : box_(box) {
  if (box_.busy.exchange(true))
    throw InputError("this State is in use by another call (another thread?); give each thread "
                     "its own State (State.copy())");
}

StateUse::~StateUse() { box_.busy.store(false); }

namespace {

void check_layer(const StateBox& b, int layer) {
  if (layer < 0 || layer >= b.state.n_layer())
    throw InputError("layer " + std::to_string(layer) + " is outside [0, " +
                     std::to_string(b.state.n_layer()) + ")");
}

py::object make_view(py::object self, float* (*pick)(State&, int), int layer,
                     std::vector<int64_t> shape) {
  StateBox& b = self.cast<StateBox&>();
  check_layer(b, layer);
  return view_array(pick(b.state, layer), std::move(shape), self);
}

}  // namespace

void register_state(py::module_& m) {
  py::class_<StateBox> cls(
      m, "State",
      "The recurrent state of an RWKV-7 context (per layer: time-mix shift [C], WKV matrix "
      "[H, N, N] fp32 with rows = value channels, channel-mix shift [C]). Get one from "
      "Model.new_state(), Model.forward(tokens), wick.generate or State.load(path, model); "
      "State(n_layer, n_embd, n_head, head_size) builds a zero state of that geometry.");
  cls.def(py::init([](int n_layer, int n_embd, int n_head, int head_size) {
             return StateBox(State(n_layer, n_embd, n_head, head_size), std::nullopt, 0);
           }),
           py::arg("n_layer"), py::arg("n_embd"), py::arg("n_head"), py::arg("head_size"))
      .def("copy", [](const StateBox& b) { return StateBox(b); },
           "A snapshot: an independent State with the same numbers.")
      .def("__copy__", [](const StateBox& b) { return StateBox(b); })
      .def("__deepcopy__", [](const StateBox& b, const py::object&) { return StateBox(b); },
           py::arg("memo"))
      .def(
          "reset",
          [](StateBox& b) {
            StateUse use(b);
            b.state.reset();
            b.continuation = {};
            b.n_tokens = 0;
          },
          "Back to zeros (a fresh context), keeping the geometry.")
      .def(
          "save",
          [](StateBox& b, const py::object& path, const std::string& note) {
            const std::string p = path_arg(path, "State.save(path)");
            if (!b.owner)
              throw InputError("State.save: this State has not been through a model yet, so there "
                               "is no model fingerprint to record; run a pass on it (or load it "
                               "with State.load) first");
            StateFileInfo info;
            info.note = note;
            info.tokenizer = b.tokenizer;
            info.n_tokens = b.n_tokens;
            info.continuation = b.continuation;
            StateUse use(b);
            py::gil_scoped_release release;
            save_state(p, b.state, *b.owner, info);
          },
          py::arg("path"), py::arg("note") = "",
          "Writes a wick state file (format 2, safetensors: wkv, tmix_shift, cmix_shift in "
          "fp32; the logits after the last absorbed token and the sampler of the generation that "
          "produced the state, when known; the model's fingerprint, token count and note in the "
          "metadata), atomically. Bit-exact round trip with State.load, and the same file `wick "
          "generate --save-state` writes. Raises wick.FileError, wick.InputError.")
      .def_static(
          "load",
          [](const py::object& path, const ModelBox& model, bool allow_other_base) {
            const std::string p = path_arg(path, "State.load(path)");
            LoadedState loaded;
            {
              py::gil_scoped_release release;
              loaded = load_state(p, model.model, allow_other_base);
            }
            if (!loaded.warnings.empty()) {
              py::object warn = py::module_::import("warnings").attr("warn");
              for (const std::string& w : loaded.warnings) warn(py::str(w), py::arg("stacklevel") = 2);
            }
            StateBox box(std::move(loaded.state), model.model, loaded.info.n_tokens);
            box.tokenizer = loaded.info.tokenizer;
            box.continuation = std::move(loaded.info.continuation);
            return box;
          },
          py::arg("path"), py::arg("model"), py::arg("allow_other_base") = false,
          "Reads a state file for `model`. A state of another geometry is always refused, one "
          "saved by other weights unless allow_other_base (then a warning). Raises "
          "wick.FileError, wick.FormatError, wick.StateFileError.")
      .def_static(
          "load_tuned",
          [](const py::object& path, const ModelBox& model) {
            const std::string p = path_arg(path, "State.load_tuned(path)");
            State state;
            {
              py::gil_scoped_release release;
              state = load_tuned_state(p, model.model);
            }
            return StateBox(std::move(state), model.model, 0);
          },
          py::arg("path"), py::arg("model"),
          "Reads a state-tuned initial state (RWKV-PEFT state tuning: blocks.{i}.att.time_state "
          "[H, N, N] per layer, .pth or safetensors, bf16/fp16/fp32) for `model`: the WKV "
          "matrices as stored (x070 is value-major: no transpose), zero token shifts. Raises "
          "wick.FileError, wick.FormatError, wick.CheckpointError, wick.StateFileError (a layer "
          "count or H*N that does not fit the model, another tensor, a wick state file).")
      .def(
          "wkv",
          [](py::object self, int layer) {
            const StateBox& b = self.cast<const StateBox&>();
            return make_view(self, [](State& s, int i) { return s.wkv(i); }, layer,
                             {b.state.n_head(), b.state.head_size(), b.state.head_size()});
          },
          py::arg("layer"),
          "Writable float32 view [H, N, N] of layer i's WKV matrices, S[h][value][key].")
      .def(
          "att_shift",
          [](py::object self, int layer) {
            const StateBox& b = self.cast<const StateBox&>();
            return make_view(self, [](State& s, int i) { return s.att_shift(i); }, layer,
                             {b.state.n_embd()});
          },
          py::arg("layer"), "Writable float32 view [C] of layer i's time-mix token shift.")
      .def(
          "ffn_shift",
          [](py::object self, int layer) {
            const StateBox& b = self.cast<const StateBox&>();
            return make_view(self, [](State& s, int i) { return s.ffn_shift(i); }, layer,
                             {b.state.n_embd()});
          },
          py::arg("layer"), "Writable float32 view [C] of layer i's channel-mix token shift.")
      .def_property_readonly("n_layer", [](const StateBox& b) { return b.state.n_layer(); })
      .def_property_readonly("n_embd", [](const StateBox& b) { return b.state.n_embd(); })
      .def_property_readonly("n_head", [](const StateBox& b) { return b.state.n_head(); })
      .def_property_readonly("head_size", [](const StateBox& b) { return b.state.head_size(); })
      .def_property_readonly("nbytes", [](const StateBox& b) { return b.state.bytes(); },
                             "Bytes of the state's numbers.")
      .def_property_readonly(
          "logits",
          [](const StateBox& b) -> py::object {
            if (!b.continuation.has_logits()) return py::none();
            std::vector<float> copy = b.continuation.logits;
            const int64_t V = static_cast<int64_t>(copy.size());
            return owned_array(std::move(copy), {V});
          },
          "float32 [V]: the logits after the last token the state absorbed (a copy), or None "
          "when not known (a zero state, a format-1 file). With them, wick.generate accepts an "
          "empty prompt and continues from this state.")
      .def_property_readonly(
          "has_sampler", [](const StateBox& b) { return b.continuation.sampler.has_value(); },
          "True when the state carries the sampler of the generation that produced it; "
          "wick.generate then resumes it unless a seed is given.")
      .def_property_readonly(
          "n_tokens", [](const StateBox& b) { return b.n_tokens; },
          "Tokens absorbed since the zero state (-1 when unknown, e.g. a file that does not say).")
      .def("__eq__",
           [](const StateBox& a, const py::object& other) {
             if (!py::isinstance<StateBox>(other)) return false;
             return a.state == other.cast<const StateBox&>().state;
           },
           "Bit-for-bit equality of the numbers (and the geometry).")
      .def("__repr__", [](const StateBox& b) {
        return "wick.State(n_layer=" + std::to_string(b.state.n_layer()) +
               ", n_embd=" + std::to_string(b.state.n_embd()) +
               ", n_tokens=" + std::to_string(b.n_tokens) + ")";
      });
  cls.attr("__hash__") = py::none();  // mutable value with __eq__: unhashable, like a list
}

}  // namespace wick::py_binding
