// wick.Model (wick/model.h): loading, the parallel pass and the recurrent step.
//
// A Model is immutable: any number of Python threads may run passes at once, each with its own
// State (passes on one Model take turns on its Runtime; each uses all of its threads). The GIL is
// released during loading and every pass.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "binding.h"
#include "model_options.h"
#include "wick/errors.h"
#include "wick/runtime.h"

namespace wick::py_binding {
namespace {

py::dict geometry_dict(const Geometry& g) {
  py::dict d;
  d["n_layer"] = g.n_layer;
  d["n_embd"] = g.n_embd;
  d["n_head"] = g.n_head;
  d["head_size"] = g.head_size;
  d["ffn_dim"] = g.ffn_dim;
  d["vocab"] = g.vocab;
  d["lora_w"] = g.lora_w;
  d["lora_a"] = g.lora_a;
  d["lora_v"] = g.lora_v;
  d["lora_g"] = g.lora_g;
  d["n_attn"] = g.n_attn;
  d["attn_ffn_dim"] = g.attn_ffn_dim;
  return d;
}

// The facts `wick info --json` prints, as a dict.
py::dict info_dict(const Model& model) {
  const ModelInfo& i = model.info();
  py::dict d;
  d["source"] = i.source;
  d["container"] = i.container;
  d["naming"] = std::string(naming_convention_name(i.convention));
  d["architecture"] = i.architecture;
  d["file_bytes"] = i.file_bytes;
  d["parameters"] = i.parameters;
  d["weight_bytes"] = i.weight_bytes;
  d["bytes_per_token"] = i.bytes_per_token;
  d["quantization"] = std::string(weight_quantization_name(i.quantization));
  d["precision"] = std::string(precision_name(model.precision()));
  d["fingerprint"] = i.fingerprint;
  d["adapter"] = i.adapter;
  d["embedding_rwkv"] = i.embedding_rwkv;
  d["has_lm_head"] = model.has_lm_head();
  py::dict dtypes;
  for (const auto& [dt, n] : i.dtype_parameters) dtypes[py::str(std::string(dtype_name(dt)))] = n;
  d["dtypes"] = dtypes;
  py::dict layouts;
  for (const auto& [name, n] : i.packed_parameters) layouts[py::str(name)] = n;
  d["layouts"] = layouts;
  d["state_bytes"] = model.new_state().bytes();
  d["threads"] = model.runtime()->threads();
  d["geometry"] = geometry_dict(model.geometry());
  return d;
}

py::object new_state_object(const Model& model) {
  return py::cast(StateBox(model.new_state(), model, 0));
}

}  // namespace

Model load_model_with(const py::object& path, const std::string& quantize,
                      const std::string& precision, const py::object& threads,
                      const py::object& lora, std::optional<double> lora_alpha,
                      double lora_scale) {
  LoadOptions options;
  if (!lora.is_none()) {
    options.lora = path_arg(lora, "Model(lora)");
    if (options.lora.empty())
      throw InputError("Model: lora is an adapter file's path or None, got an empty string");
  } else if (lora_alpha || lora_scale != 1.0) {
    throw InputError(
        "Model: lora_alpha and lora_scale describe a LoRA adapter; give its file as lora=PATH");
  }
  options.lora_alpha = lora_alpha;
  options.lora_scale = lora_scale;
  options.quantize = parse_quantize(quantize);
  options.precision = parse_precision(precision);
  int n_threads = 0;
  if (!threads.is_none()) {
    if (!PyLong_Check(threads.ptr()) || PyBool_Check(threads.ptr()))
      throw py::type_error("Model: threads is an int or None, got " +
                           std::string(Py_TYPE(threads.ptr())->tp_name));
    n_threads = threads.cast<int>();
    if (n_threads < 1)
      throw InputError("Model: threads must be >= 1 (or None for one per core), got " +
                       std::to_string(n_threads));
  }
  const bool embedded = path.is_none();
  const std::string p = embedded ? std::string() : path_arg(path, "Model(path)");
  py::gil_scoped_release release;
  Model model = embedded ? Model::load_default(options) : Model::load(p, options);
  if (n_threads > 0) model = model.with_runtime(std::make_shared<Runtime>(n_threads));
  return model;
}

void register_model(py::module_& m) {
  py::class_<ModelBox, std::shared_ptr<ModelBox>>(
      m, "Model",
      "An RWKV-7 model. Model(path, quantize=\"none\", precision=\"fp32\", threads=None): path is "
      "a .safetensors file, an official .pth, an rwkv-quant .rwkvq file or a HuggingFace / fla "
      "folder (None: the tiny model embedded in wick); quantize \"none\" | \"int8\" (per-row INT8 "
      "at load); precision \"fp32\" | \"bf16\" | \"int8\" (input precision of the large matrix products); "
      "threads: kernel threads (None: one per core); lora: a LoRA adapter file (RWKV-PEFT or "
      "rwkv-metal) applied at run time with lora_alpha (its training alpha; required unless the "
      "file stores it) and lora_scale (extra multiplier), as `wick generate --lora`. Raises wick.FileError, wick.FormatError, "
      "wick.CheckpointError, wick.InputError. Immutable: threads may share it, each with its "
      "own State.")
      .def(py::init([](const py::object& path, const std::string& quantize,
                       const std::string& precision, const py::object& threads,
                       const py::object& lora, std::optional<double> lora_alpha,
                       double lora_scale) {
             return std::make_shared<ModelBox>(ModelBox{load_model_with(
                 path, quantize, precision, threads, lora, lora_alpha, lora_scale)});
           }),
           py::arg("path"), py::arg("quantize") = "none", py::arg("precision") = "fp32",
           py::arg("threads") = py::none(), py::kw_only(), py::arg("lora") = py::none(),
           py::arg("lora_alpha") = py::none(), py::arg("lora_scale") = 1.0)
      .def_property_readonly(
          "info", [](const ModelBox& b) { return info_dict(b.model); },
          "dict: source, container, naming, architecture, parameters, file_bytes, weight_bytes, "
          "bytes_per_token, quantization, precision, fingerprint (\"sha256:...\"), adapter, dtypes, "
          "layouts, state_bytes, threads, geometry (n_layer, n_embd, n_head, head_size, ffn_dim, "
          "vocab, LoRA ranks, n_attn, attn_ffn_dim).")
      .def_property_readonly(
          "geometry", [](const ModelBox& b) { return geometry_dict(b.model.geometry()); },
          "dict of the dimensions read from the weight shapes (L, C, H, N, F, V, ...).")
      .def_property_readonly("vocab", [](const ModelBox& b) { return b.model.geometry().vocab; },
                             "V, the number of logits per position.")
      .def(
          "new_state", [](const ModelBox& b) { return new_state_object(b.model); },
          "A zero State for this model (the start of a fresh context).")
      .def(
          "forward",
          [](const ModelBox& b, const py::object& tokens, py::object state, bool all_positions) {
            const std::vector<int32_t> ids = token_list(tokens, "Model.forward");
            if (state.is_none()) state = new_state_object(b.model);
            StateBox& box = object_arg<StateBox>(state, "state", "a wick.State or None");
            std::vector<float> logits;
            {
              StateUse use(box);
              py::gil_scoped_release release;
              logits = b.model.forward(ids, box.state, all_positions);
            }
            box.owner = b.model;
            if (box.n_tokens >= 0) box.n_tokens += static_cast<int64_t>(ids.size());
            const int64_t V = b.model.geometry().vocab;
            // The prediction after the last absorbed token travels with the state.
            box.continuation.logits.assign(logits.end() - V, logits.end());
            std::vector<int64_t> shape =
                all_positions ? std::vector<int64_t>{static_cast<int64_t>(ids.size()), V}
                              : std::vector<int64_t>{V};
            return py::make_tuple(owned_array(std::move(logits), std::move(shape)), state);
          },
          py::arg("tokens"), py::arg("state") = py::none(), py::arg("all_positions") = false,
          "Parallel pass over tokens (an int or a sequence of ints) continuing from `state` (None: "
          "a zero state), which is advanced IN PLACE and returned: (logits, state). logits: "
          "float32 [V] of the last position, or [T, V] with all_positions. Take state.copy() "
          "first to keep a snapshot. Raises wick.InputError (empty tokens, an id outside [0, V), "
          "a State of another geometry; the state is then unchanged) and TypeError.")
      .def(
          "step",
          [](const ModelBox& b, const py::object& token, py::object state) {
            const std::vector<int32_t> ids = token_list(token, "Model.step");
            if (ids.size() != 1)
              throw InputError("Model.step takes one token id, got " + std::to_string(ids.size()) +
                               "; use Model.forward for a sequence");
            if (state.is_none()) state = new_state_object(b.model);
            StateBox& box = object_arg<StateBox>(state, "state", "a wick.State or None");
            std::vector<float> logits;
            {
              StateUse use(box);
              py::gil_scoped_release release;
              logits = b.model.step(ids[0], box.state);
            }
            box.owner = b.model;
            if (box.n_tokens >= 0) box.n_tokens += 1;
            const int64_t V = b.model.geometry().vocab;
            box.continuation.logits = logits;  // the prediction after the absorbed token
            return py::make_tuple(owned_array(std::move(logits), {V}), state);
          },
          py::arg("token"), py::arg("state"),
          "Recurrent step over one token id: (logits [V] float32, state), the state advanced IN "
          "PLACE. Bit-identical to the matching row of forward(..., all_positions=True).")
      .def("__repr__", [](const ModelBox& b) {
        const Geometry& g = b.model.geometry();
        return "wick.Model(" + b.model.info().source + ", L=" + std::to_string(g.n_layer) +
               ", C=" + std::to_string(g.n_embd) + ", V=" + std::to_string(g.vocab) + ")";
      });
}

}  // namespace wick::py_binding
