// The time mix's gate loops: their baseline build (SSE2 on x86-64) and their dispatch.
#include "kernels/gate_loops.h"

#include "kernels/gate_loops_impl.h"
#include "kernels/kernel_table.h"

namespace wick::kernels {

const GateLoops& gate_loops_scalar() {
  return make_gate_table("scalar");
}

const GateLoops& gate_loops_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return gate_loops_avx512();
    case Isa::kAvx2:
      return gate_loops_avx2();
    case Isa::kScalar:
      break;
  }
  return gate_loops_scalar();
}

const GateLoops& gate_loops() {
  return kernel_table().gates;
}

}  // namespace wick::kernels
