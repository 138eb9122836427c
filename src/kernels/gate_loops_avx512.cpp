// The time mix's gate loops compiled for AVX-512 (only called when the CPU has it).
#include "kernels/gate_loops_impl.h"

namespace wick::kernels {

const GateLoops& gate_loops_avx512() {
  return make_gate_table("avx512");
}

}  // namespace wick::kernels
