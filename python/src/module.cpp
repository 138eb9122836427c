// The extension module `wick._wick`; the package `wick` (python/wick/__init__.py) re-exports it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "binding.h"
#include "wick/generate.h"
#include "wick/runtime.h"
#include "wick/version.h"

namespace py = pybind11;
using namespace wick::py_binding;

PYBIND11_MODULE(_wick, m) {
  m.doc() = "wick: RWKV-7 language models in C++ (native part of the `wick` package)";
  register_errors(m);  // first: the translators serve every later registration
  register_arrays(m);
  register_tokenizer(m);
  register_model(m);
  register_state(m);
  register_sampler(m);
  register_generate(m);
  register_engine(m);
  register_tasks(m);
  register_compat(m);

  m.attr("__version__") = std::string(wick::version());
  m.def("default_stop_tokens", &wick::default_stop_tokens, py::arg("vocab"),
        "The end-of-text ids generation stops at by default for a vocabulary of `vocab` ids: "
        "[0] for the World vocabulary (65536), [] otherwise.");
  m.def("kernel_isa", [] { return std::string(wick::kernel_isa()); },
        "The kernels' instruction set: \"avx512\", \"avx2\" or \"scalar\".");
  m.def("default_thread_count", &wick::default_thread_count,
        "Kernel threads of a Model loaded with threads=None (one per core).");
}
