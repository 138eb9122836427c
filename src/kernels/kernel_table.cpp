#include "kernels/kernel_table.h"

#include "kernels/int8_matmul_impl.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/wkv7.h"

namespace wick::kernels {

KernelTable kernel_table_for(Isa isa) {
  return KernelTable{isa,
                     dot_kernels_for(isa),
                     int8::kernels_for(isa),
                     qmat::kernels_for(isa),
                     &qmat::int8_input_kernels_for(isa),
                     attention_kernels_for(isa),
                     sampler_loops_for(isa),
                     gate_loops_for(isa),
                     bf16_dot_kernels_for(isa)};
}

const KernelTable& kernel_table() {
  static const KernelTable table = kernel_table_for(active_isa());
  return table;
}

std::vector<std::pair<std::string, std::string>> KernelTable::describe() const {
  return {{"dot", dot.name},
          {"bf16-dot", bf16_dot ? bf16_dot->name : "fp32-dot"},
          {"int8", int8.name},
          {"packed", packed.name},
          {"packed-int8", packed_int8->name},
          {"wkv", wkv7_head_kernel_name(isa, 64)},
          {"attention", attention.name},
          {"sampler", sampler.name},
          {"gates", gates.name}};
}

}  // namespace wick::kernels
