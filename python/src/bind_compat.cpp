// Native half of wick.compat (the `rwkv` pip package's API): a model pass on a state held as the
// pip package holds it - a list of 3·L float32 arrays, [3i] time-mix shift [C], [3i+1] WKV
// [H, N, N] (row = value channel, as wick's State), [3i+2] channel-mix shift [C] - read before
// the pass and written back into the same arrays after it (in place, as the pip package mutates
// its state). The pure-Python side (python/wick/compat) converts torch tensors to and from these
// arrays.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "binding.h"
#include "wick/errors.h"

namespace wick::py_binding {
namespace {

// One element of the state list as a float32 buffer of `count` values. Raises wick.InputError
// naming the element when it is not one.
class ElementBuffer {
 public:
  ElementBuffer(const py::handle& obj, size_t index, size_t count, bool writable) {
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (!PyObject_CheckBuffer(obj.ptr()) || PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
      PyErr_Clear();
      throw InputError("state[" + std::to_string(index) + "]: expected a " +
                       (writable ? std::string("writable ") : std::string()) +
                       "C-contiguous float32 array, got " + Py_TYPE(obj.ptr())->tp_name);
    }
    held_ = true;
    const std::string format = view_.format ? view_.format : "B";
    const bool f32 = view_.itemsize == 4 && format.find('f') != std::string::npos;
    if (!f32 || static_cast<size_t>(view_.len) != count * sizeof(float)) {
      const std::string found = format + " x " + std::to_string(view_.len / (view_.itemsize ? view_.itemsize : 1));
      PyBuffer_Release(&view_);
      held_ = false;
      throw InputError("state[" + std::to_string(index) + "]: expected " + std::to_string(count) +
                       " float32 values for this model, found " + found +
                       " (a state of another model?)");
    }
  }
  ~ElementBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  ElementBuffer(const ElementBuffer&) = delete;
  ElementBuffer& operator=(const ElementBuffer&) = delete;
  float* data() { return static_cast<float*>(view_.buf); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

}  // namespace

void register_compat(py::module_& m) {
  m.def(
      "_compat_zero_state",
      [](const ModelBox& model) {
        const State s = model.model.new_state();
        const int64_t C = s.n_embd(), H = s.n_head(), N = s.head_size();
        py::list out;
        for (int i = 0; i < s.n_layer(); ++i) {
          out.append(owned_array(std::vector<float>(static_cast<size_t>(C)), {C}));
          out.append(owned_array(std::vector<float>(s.wkv_size()), {H, N, N}));
          out.append(owned_array(std::vector<float>(static_cast<size_t>(C)), {C}));
        }
        return out;
      },
      py::arg("model"), "Zero state as a list of 3·L float32 arrays (the rwkv pip layout).");

  m.def(
      "_compat_forward",
      [](const ModelBox& model, const py::object& tokens, const py::list& state,
         bool full_output) {
        const std::vector<int32_t> ids = token_list(tokens, "RWKV.forward(tokens)");
        State s = model.model.new_state();
        const size_t L = static_cast<size_t>(s.n_layer());
        if (static_cast<size_t>(py::len(state)) != 3 * L)
          throw InputError("RWKV.forward: the state has " + std::to_string(py::len(state)) +
                           " arrays; this model's has 3 x " + std::to_string(L) + " = " +
                           std::to_string(3 * L) + " (a state of another model?)");
        const size_t C = static_cast<size_t>(s.n_embd());
        auto sizes = [&](size_t k) { return k % 3 == 1 ? s.wkv_size() : C; };
        auto target = [&](size_t k) {
          const int layer = static_cast<int>(k / 3);
          return k % 3 == 0 ? s.att_shift(layer) : k % 3 == 1 ? s.wkv(layer) : s.ffn_shift(layer);
        };
        for (size_t k = 0; k < 3 * L; ++k) {
          ElementBuffer b(state[k], k, sizes(k), /*writable=*/false);
          std::memcpy(target(k), b.data(), sizes(k) * sizeof(float));
        }
        std::vector<float> logits;
        {
          py::gil_scoped_release release;
          logits = model.model.forward(ids, s, full_output);
        }
        for (size_t k = 0; k < 3 * L; ++k) {
          ElementBuffer b(state[k], k, sizes(k), /*writable=*/true);
          std::memcpy(b.data(), target(k), sizes(k) * sizeof(float));
        }
        const int64_t V = model.model.geometry().vocab;
        std::vector<int64_t> shape = full_output
                                         ? std::vector<int64_t>{static_cast<int64_t>(ids.size()), V}
                                         : std::vector<int64_t>{V};
        return owned_array(std::move(logits), std::move(shape));
      },
      py::arg("model"), py::arg("tokens"), py::arg("state"), py::arg("full_output") = false,
      "Parallel pass continuing from (and writing back into) a rwkv-pip-layout state list.");
}

}  // namespace wick::py_binding
