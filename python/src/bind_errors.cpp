// wick's typed errors (include/wick/errors.h) as Python exceptions. Every error wick throws arrives
// in Python as an instance of a subclass of wick.Error carrying wick's message unchanged:
//
//   wick.Error(Exception)
//   ├── wick.FileError            .path
//   ├── wick.FormatError          .path .tensor .expected .found
//   │   └── wick.UnsafePickleError
//   ├── wick.CheckpointError      .path
//   ├── wick.StateFileError       .path
//   ├── wick.InputError(…, ValueError)
//   │   └── wick.ContextFullError
//   ├── wick.QueueFullError
//   ├── wick.EngineStoppedError
//   └── wick.EvaluationError
//
// InputError is also a ValueError, so code that catches ValueError for bad arguments keeps
// working. FileError is not an OSError: OSError's constructor reinterprets its arguments
// (errno, strerror), which would garble wick's messages.
#include <pybind11/pybind11.h>

#include "binding.h"
#include "wick/errors.h"
#include "wick/perplexity.h"

namespace wick::py_binding {
namespace {

// The exception classes, created once per interpreter when the module is imported. Never freed:
// the module's functions may raise them until the interpreter ends.
struct ErrorClasses {
  PyObject* error = nullptr;
  PyObject* file = nullptr;
  PyObject* format = nullptr;
  PyObject* unsafe_pickle = nullptr;
  PyObject* checkpoint = nullptr;
  PyObject* state_file = nullptr;
  PyObject* input = nullptr;
  PyObject* context_full = nullptr;
  PyObject* queue_full = nullptr;
  PyObject* engine_stopped = nullptr;
  PyObject* evaluation = nullptr;
};

ErrorClasses& classes() {
  static ErrorClasses c;
  return c;
}

PyObject* make_class(py::module_& m, const char* name, const char* doc, py::tuple bases) {
  const std::string qualified = std::string("wick.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // the module holds one reference, classes() another
  return cls;
}

// Raises `cls(message)` with the given attributes set on the instance.
void raise(PyObject* cls, const std::string& message,
           std::initializer_list<std::pair<const char*, std::string>> attributes = {}) {
  py::object instance = py::reinterpret_borrow<py::object>(cls)(py::str(message));
  for (const auto& [key, value] : attributes) instance.attr(key) = py::str(value);
  PyErr_SetObject(cls, instance.ptr());
}

}  // namespace

void register_errors(py::module_& m) {
  ErrorClasses& c = classes();
  const py::handle exc(PyExc_Exception);
  c.error = make_class(m, "Error", "Base of every error wick raises; the message is wick's.",
                       py::make_tuple(exc));
  const py::handle base(c.error);
  c.file = make_class(m, "FileError",
                      "A file could not be opened, mapped, read or written (.path).",
                      py::make_tuple(base));
  c.format = make_class(m, "FormatError",
                        "A container (safetensors, PyTorch zip/pickle) breaks its format "
                        "(.path, .tensor, .expected, .found).",
                        py::make_tuple(base));
  c.unsafe_pickle = make_class(m, "UnsafePickleError",
                               "A PyTorch pickle asked for something a state dict never needs; "
                               "nothing from it was executed.",
                               py::make_tuple(py::handle(c.format)));
  c.checkpoint = make_class(m, "CheckpointError",
                            "The tensors are not an RWKV-7 model wick can run (.path).",
                            py::make_tuple(base));
  c.state_file = make_class(m, "StateFileError",
                            "Not a state file this model can continue (other geometry or "
                            "weights, unknown version) (.path).",
                            py::make_tuple(base));
  c.input = make_class(m, "InputError",
                       "Bad input at run time: a token id outside the vocabulary, a State of "
                       "another geometry, an option out of range. Also a ValueError.",
                       py::make_tuple(base, py::handle(PyExc_ValueError)));
  c.context_full = make_class(m, "ContextFullError",
                              "RWKV-X: a KV cache would pass its configured maximum.",
                              py::make_tuple(py::handle(c.input)));
  c.queue_full = make_class(m, "QueueFullError",
                            "The engine's request queue is full; nothing was queued.",
                            py::make_tuple(base));
  c.engine_stopped = make_class(m, "EngineStoppedError",
                                "The engine is shutting down and accepts no new requests.",
                                py::make_tuple(base));
  c.evaluation = make_class(m, "EvaluationError",
                            "A perplexity or KL computation produced an impossible number.",
                            py::make_tuple(base));

  // Most derived first.
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    const ErrorClasses& k = classes();
    try {
      std::rethrow_exception(p);
    } catch (const UnsafePickleError& e) {
      raise(k.unsafe_pickle, e.what(), {{"path", e.path()}, {"tensor", e.tensor()},
                                        {"expected", e.expected()}, {"found", e.found()}});
    } catch (const FormatError& e) {
      raise(k.format, e.what(), {{"path", e.path()}, {"tensor", e.tensor()},
                                 {"expected", e.expected()}, {"found", e.found()}});
    } catch (const FileError& e) {
      raise(k.file, e.what(), {{"path", e.path()}});
    } catch (const CheckpointError& e) {
      raise(k.checkpoint, e.what(), {{"path", e.path()}});
    } catch (const StateFileError& e) {
      raise(k.state_file, e.what(), {{"path", e.path()}});
    } catch (const ContextFullError& e) {
      raise(k.context_full, e.what());
    } catch (const InputError& e) {
      raise(k.input, e.what());
    } catch (const QueueFullError& e) {
      raise(k.queue_full, e.what());
    } catch (const EngineStoppedError& e) {
      raise(k.engine_stopped, e.what());
    } catch (const EvaluationError& e) {
      raise(k.evaluation, e.what());
    } catch (const Error& e) {
      raise(k.error, e.what());
    }
    // Anything else (py::error_already_set, std::bad_alloc, ...) falls through to pybind11's own
    // translators.
  });
}

}  // namespace wick::py_binding
