// Shared pieces of the `wick._wick` extension module (python/src/*.cpp): the Python-side holders
// of wick's objects, argument conversion, float arrays handed to Python, and the registration
// function of each part. Each bind_<area>.cpp binds one area of the public API (register_<area>,
// include/wick/*.h); the other .cpp files hold conversions those share.
//
// GIL: every call that runs model passes, generation, loading or evaluation releases the GIL
// (py::gil_scoped_release) around the library call. Library callbacks never touch Python objects:
// they run on engine threads and only push into C++ queues (stream.h).
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wick/continuation.h"
#include "wick/model.h"
#include "wick/state.h"
#include "wick/tokenizer.h"

namespace wick::py_binding {

namespace py = pybind11;

// --- Holders ---------------------------------------------------------------------------------

// wick.Model: a loaded model (copies share the weights and the Runtime).
struct ModelBox {
  Model model;
};

// wick.Tokenizer: immutable, shared with the embedders / rerankers / engines that use it.
struct TokenizerBox {
  std::shared_ptr<const Tokenizer> tokenizer;
};

// wick.State: the native recurrent State plus what the Python object knows about it. The State
// itself stays a plain value (wick/state.h); the box adds bookkeeping the front end needs for
// State.save() without a model argument, and the continuation (wick/continuation.h: the logits
// after the last absorbed token, the sampler of the generation that produced it) that state
// files of format 2 carry, so an empty prompt continues it.
struct StateBox {
  State state;
  Continuation continuation;
  // The model whose pass last wrote (or whose file loaded) this state: its fingerprint goes into
  // a saved file. Empty for a State built from bare sizes that no pass has touched yet.
  std::optional<Model> owner;
  int64_t n_tokens = 0;     // tokens absorbed since zero (-1: unknown, e.g. a file without it)
  std::string tokenizer;    // tokenizer name of the last generate() on it ("" unknown)
  // Set while a call uses the state with the GIL released, so a second thread cannot touch the
  // same State at the same time (StateUse below raises wick.InputError instead of racing).
  std::atomic<bool> busy{false};

  StateBox() = default;
  StateBox(State s, std::optional<Model> m, int64_t n) : state(std::move(s)), owner(std::move(m)), n_tokens(n) {}
  StateBox(const StateBox& o)
      : state(o.state), continuation(o.continuation), owner(o.owner), n_tokens(o.n_tokens),
        tokenizer(o.tokenizer) {}
};

// Marks a StateBox busy for the lifetime of the guard. Throws wick::InputError when another call
// is using it.
class StateUse {
 public:
  explicit StateUse(StateBox& box);
  ~StateUse();
  StateUse(const StateUse&) = delete;
  StateUse& operator=(const StateUse&) = delete;

 private:
  StateBox& box_;
};

// --- Arguments -------------------------------------------------------------------------------

// `obj` as a bound wick object of type T (wick.State, wick.Tokenizer, ...); TypeError naming
// `what` and the expected class otherwise (pybind11's own cast would raise RuntimeError).
template <class T>
T& object_arg(const py::handle& obj, const char* what, const char* expected) {
  if (!py::isinstance<T>(obj))
    throw py::type_error(std::string(what) + ": expected " + expected + ", got " +
                         Py_TYPE(obj.ptr())->tp_name);
  return obj.cast<T&>();
}

// Token ids from an int or any iterable of ints (list, tuple, range, numpy integer array). Raises
// TypeError for anything else (floats, strings, None) and wick.InputError for a value outside
// the int32 range; ids outside the vocabulary are the library's InputError.
std::vector<int32_t> token_list(const py::handle& obj, const char* what);
// A list of str (or one str) -> UTF-8 strings; None -> empty. TypeError otherwise.
std::vector<std::string> string_list(const py::handle& obj, const char* what);
// A path: str or os.PathLike (TypeError otherwise).
std::string path_arg(const py::handle& obj, const char* what);
// A contiguous float32 buffer (numpy array, memoryview, wick.FloatArray, torch CPU tensor via
// __array__): copied into a vector. TypeError for other dtypes or objects.
std::vector<float> float_vector(const py::handle& obj, const char* what);

// --- Arrays handed to Python -------------------------------------------------------------------

// A float32 array that owns `data` (shape: row-major, outermost first): a numpy array when numpy
// is importable (no copy: the array keeps the vector alive), else a wick.FloatArray.
py::object owned_array(std::vector<float>&& data, std::vector<int64_t> shape);
// A float32 view of memory owned by `base` (kept alive by the view), writable. Valid while the
// memory stays where it is (a State's buffers never move once it exists).
py::object view_array(float* data, std::vector<int64_t> shape, py::object base);

// --- Registration ------------------------------------------------------------------------------

void register_errors(py::module_& m);
void register_arrays(py::module_& m);
void register_tokenizer(py::module_& m);
void register_model(py::module_& m);
void register_state(py::module_& m);
void register_sampler(py::module_& m);
void register_generate(py::module_& m);
void register_engine(py::module_& m);
void register_tasks(py::module_& m);
void register_compat(py::module_& m);

}  // namespace wick::py_binding
