// The time mix's gate loops compiled for AVX2 (only called when the CPU has it).
#include "kernels/gate_loops_impl.h"

namespace wick::kernels {

const GateLoops& gate_loops_avx2() {
  return make_gate_table("avx2");
}

}  // namespace wick::kernels
