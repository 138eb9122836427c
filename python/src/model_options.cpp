#include "model_options.h"

#include "wick/errors.h"

namespace wick::py_binding {

WeightQuantization parse_quantize(const std::string& name) {
  for (WeightQuantization q : {WeightQuantization::kNone, WeightQuantization::kInt8})
    if (name == weight_quantization_name(q)) return q;
  throw InputError("quantize: expected \"none\" or \"int8\", found \"" + name + "\"");
}

Precision parse_precision(const std::string& name) {
  std::string expected;
  for (Precision p : kPrecisions) {
    if (name == precision_name(p)) return p;
    expected += (expected.empty() ? "\"" : ", \"") + std::string(precision_name(p)) + "\"";
  }
  throw InputError("precision: expected one of " + expected + ", found \"" + name + "\"");
}

}  // namespace wick::py_binding
