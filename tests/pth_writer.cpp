#include "pth_writer.h"

#include <fstream>
#include <stdexcept>

namespace wick::test::pth {

namespace {

std::string storage_type(DType d) {
  switch (d) {
    case DType::F32:
      return "FloatStorage";
    case DType::F16:
      return "HalfStorage";
    case DType::BF16:
      return "BFloat16Storage";
    default:
      throw std::invalid_argument("write_pth: only F32, F16 and BF16 tensors");
  }
}

}  // namespace

bool write_pth(const std::filesystem::path& path, const std::vector<PthTensor>& tensors) {
  std::vector<TensorSpec> specs;
  std::vector<std::pair<std::string, std::string>> storages;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PthTensor& t = tensors[i];
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    specs.push_back({t.name, storage_type(t.dtype), std::to_string(i), numel, 0, t.shape, {}});
    storages.emplace_back(std::to_string(i), t.bytes);
  }
  const std::string zip = make_zip(pth_items(state_dict(specs), storages));
  std::ofstream f(path, std::ios::binary);
  f.write(zip.data(), static_cast<std::streamsize>(zip.size()));
  return static_cast<bool>(f);
}

}  // namespace wick::test::pth
