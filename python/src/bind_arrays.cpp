// Float arrays handed to Python and the argument conversions shared by every binding file.
//
// numpy is optional. When it is importable, arrays are numpy float32 arrays that own (or view)
// wick's memory without a copy. Without it they are wick.FloatArray objects: the same memory
// through the buffer protocol (memoryview(a), array.array, any buffer consumer), with .shape,
// .tolist(), len() and, for 1-D arrays, indexing.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <climits>
#include <cstring>

#include "binding.h"
#include "wick/errors.h"

namespace wick::py_binding {
namespace {

// Whether numpy imported when the module was loaded (then arrays are numpy arrays).
bool& numpy_available() {
  static bool available = false;
  return available;
}

// wick.FloatArray: float32 memory with a shape, owned (a vector) or borrowed from `base`.
struct FloatArray {
  std::vector<float> owned;
  float* data = nullptr;
  std::vector<int64_t> shape;
  py::object base;  // keeps borrowed memory alive

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t flat_index(int64_t i) const {
    if (shape.size() != 1)
      throw py::type_error("wick.FloatArray: indexing is for 1-D arrays; use memoryview(a) or "
                           "install numpy for " + std::to_string(shape.size()) + "-D arrays");
    const int64_t n = shape[0];
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw py::index_error("wick.FloatArray index out of range");
    return i;
  }
};

std::vector<py::ssize_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t s = sizeof(float);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= static_cast<py::ssize_t>(shape[i]);
  }
  return strides;
}

py::list to_list(const float* data, const std::vector<int64_t>& shape, size_t dim) {
  py::list out;
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (dim + 1 == shape.size())
      out.append(py::float_(data[i]));
    else
      out.append(to_list(data + i * inner, shape, dim + 1));
  }
  return out;
}

}  // namespace

py::object owned_array(std::vector<float>&& data, std::vector<int64_t> shape) {
  if (numpy_available()) {
    auto* holder = new std::vector<float>(std::move(data));
    py::capsule owner(holder, [](void* p) { delete static_cast<std::vector<float>*>(p); });
    std::vector<py::ssize_t> dims(shape.begin(), shape.end());
    return py::array_t<float>(dims, strides_of(shape), holder->data(), owner);
  }
  FloatArray a;
  a.owned = std::move(data);
  a.data = a.owned.data();
  a.shape = std::move(shape);
  return py::cast(std::move(a));
}

py::object view_array(float* data, std::vector<int64_t> shape, py::object base) {
  if (numpy_available()) {
    std::vector<py::ssize_t> dims(shape.begin(), shape.end());
    return py::array_t<float>(dims, strides_of(shape), data, base);
  }
  FloatArray a;
  a.data = data;
  a.shape = std::move(shape);
  a.base = std::move(base);
  return py::cast(std::move(a));
}

std::vector<int32_t> token_list(const py::handle& obj, const char* what) {
  auto one = [&](PyObject* item, size_t position, bool single) -> int32_t {
    if (PyBool_Check(item) || PyFloat_Check(item) || !PyIndex_Check(item)) {
      const std::string type = Py_TYPE(item)->tp_name;
      throw py::type_error(std::string(what) + ": token ids are ints; found " + type +
                           (single ? "" : " at position " + std::to_string(position)));
    }
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(item));
    if (!index) throw py::error_already_set();
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow || v < INT32_MIN || v > INT32_MAX)
      throw InputError(std::string(what) + ": token id " + py::str(index).cast<std::string>() +
                       (single ? "" : " at position " + std::to_string(position)) +
                       " is outside the int32 range");
    return static_cast<int32_t>(v);
  };
  if (obj.is_none())
    throw py::type_error(std::string(what) + ": expected an int or a sequence of ints, got None");
  // An int (or numpy integer scalar): one token. Arrays also define __index__, so anything
  // iterable is taken as a sequence first.
  if (!PySequence_Check(obj.ptr()) && Py_TYPE(obj.ptr())->tp_iter == nullptr &&
      PyIndex_Check(obj.ptr()))
    return {one(obj.ptr(), 0, true)};
  if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()))
    throw py::type_error(std::string(what) +
                         ": expected token ids (ints), got text; encode it with a Tokenizer first");
  py::object it = py::reinterpret_steal<py::object>(PyObject_GetIter(obj.ptr()));
  if (!it) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + ": expected an int or a sequence of ints, got " +
                         Py_TYPE(obj.ptr())->tp_name);
  }
  std::vector<int32_t> ids;
  if (PySequence_Check(obj.ptr())) {
    const Py_ssize_t n = PySequence_Size(obj.ptr());
    if (n > 0) ids.reserve(static_cast<size_t>(n));
    else PyErr_Clear();
  }
  while (PyObject* raw = PyIter_Next(it.ptr())) {
    py::object item = py::reinterpret_steal<py::object>(raw);
    ids.push_back(one(item.ptr(), ids.size(), false));
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  return ids;
}

std::vector<std::string> string_list(const py::handle& obj, const char* what) {
  if (obj.is_none()) return {};
  if (PyUnicode_Check(obj.ptr())) return {obj.cast<std::string>()};
  std::vector<std::string> out;
  py::object it = py::reinterpret_steal<py::object>(PyObject_GetIter(obj.ptr()));
  if (!it) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + ": expected a str or a list of str, got " +
                         Py_TYPE(obj.ptr())->tp_name);
  }
  while (PyObject* raw = PyIter_Next(it.ptr())) {
    py::object item = py::reinterpret_steal<py::object>(raw);
    if (!PyUnicode_Check(item.ptr()))
      throw py::type_error(std::string(what) + ": expected str items, found " +
                           Py_TYPE(item.ptr())->tp_name);
    out.push_back(item.cast<std::string>());
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  return out;
}

std::string path_arg(const py::handle& obj, const char* what) {
  if (PyUnicode_Check(obj.ptr())) return obj.cast<std::string>();
  if (py::hasattr(obj, "__fspath__")) {
    py::object p = obj.attr("__fspath__")();
    if (PyUnicode_Check(p.ptr())) return p.cast<std::string>();
    if (PyBytes_Check(p.ptr())) return p.cast<std::string>();
  }
  throw py::type_error(std::string(what) + ": expected a path (str or os.PathLike), got " +
                       Py_TYPE(obj.ptr())->tp_name);
}

std::vector<float> float_vector(const py::handle& obj, const char* what) {
  py::object source = py::reinterpret_borrow<py::object>(obj);
  if (!PyObject_CheckBuffer(source.ptr()) && py::hasattr(source, "__array__"))
    source = source.attr("__array__")();  // e.g. a CPU torch tensor
  if (!PyObject_CheckBuffer(source.ptr()))
    throw py::type_error(std::string(what) + ": expected a float32 array (numpy array, "
                         "memoryview, wick.FloatArray), got " + Py_TYPE(obj.ptr())->tp_name);
  Py_buffer view;
  if (PyObject_GetBuffer(source.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + ": expected a C-contiguous float array");
  }
  std::vector<float> out;
  const std::string format = view.format ? view.format : "B";
  const std::string kind = format.empty() ? "" : format.substr(format.find_first_not_of("@=<"));
  try {
    const size_t n = static_cast<size_t>(view.len / (view.itemsize > 0 ? view.itemsize : 1));
    if (kind == "f" && view.itemsize == 4) {
      out.resize(n);
      std::memcpy(out.data(), view.buf, n * sizeof(float));
    } else if (kind == "d" && view.itemsize == 8) {
      out.resize(n);
      const double* d = static_cast<const double*>(view.buf);
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(d[i]);
    } else {
      throw py::type_error(std::string(what) + ": expected float32 (or float64) values, found "
                           "buffer format '" + format + "'");
    }
  } catch (...) {
    PyBuffer_Release(&view);
    throw;
  }
  PyBuffer_Release(&view);
  return out;
}

void register_arrays(py::module_& m) {
  try {
    py::module_::import("numpy");
    numpy_available() = true;
  } catch (const py::error_already_set&) {
    numpy_available() = false;  // FloatArray it is
  }
  m.attr("_numpy") = py::bool_(numpy_available());

  py::class_<FloatArray>(m, "FloatArray", py::buffer_protocol(),
                         "float32 array of wick's (when numpy is not installed): the buffer "
                         "protocol gives its memory (memoryview(a)); .shape, .tolist(), len(); "
                         "1-D arrays index and assign like lists.")
      .def_buffer([](FloatArray& a) {
        std::vector<py::ssize_t> dims(a.shape.begin(), a.shape.end());
        return py::buffer_info(a.data, sizeof(float), py::format_descriptor<float>::format(),
                               static_cast<py::ssize_t>(a.shape.size()), dims,
                               strides_of(a.shape));
      })
      .def_property_readonly("shape", [](const FloatArray& a) {
        py::tuple t(a.shape.size());
        for (size_t i = 0; i < a.shape.size(); ++i) t[i] = py::int_(a.shape[i]);
        return t;
      })
      .def("__len__", [](const FloatArray& a) { return a.shape.empty() ? 0 : a.shape[0]; })
      .def("__getitem__", [](const FloatArray& a, int64_t i) { return a.data[a.flat_index(i)]; })
      .def("__setitem__",
           [](FloatArray& a, int64_t i, float v) { a.data[a.flat_index(i)] = v; })
      .def("tolist", [](const FloatArray& a) { return to_list(a.data, a.shape, 0); })
      .def("__repr__", [](const FloatArray& a) {
        std::string s = "wick.FloatArray(shape=(";
        for (size_t i = 0; i < a.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(a.shape[i]);
        return s + (a.shape.size() == 1 ? ",))" : "))");
      });
}

}  // namespace wick::py_binding
