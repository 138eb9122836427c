#include "bench/roofline.h"

#include <algorithm>

#include "wick/geometry.h"

namespace wick::bench {

double roofline_seconds(double bytes, double bytes_per_s) {
  return bytes_per_s > 0 ? bytes / bytes_per_s : 0;
}

double roofline_fraction(double limit_seconds, double measured_seconds) {
  return measured_seconds > 0 ? limit_seconds / measured_seconds : 0;
}

double peak_fraction(double rate, double peak) {
  return peak > 0 ? rate / peak : 0;
}

double prefill_flops_per_token(const Geometry& g, int n_prompt) {
  if (n_prompt < 1) return 0;
  const double C = g.n_embd;
  // Weights (multiply-adds per token) of one RWKV-7 block and of one attention block.
  const double rwkv = 4 * C * C + 2 * C * g.ffn_dim + 2 * C * (g.lora_w + g.lora_a + g.lora_g);
  const double value_lora = 2 * C * g.lora_v;  // every block but the first
  const double attention = 4 * C * C + 2 * C * g.attn_ffn_dim;
  const double per_token =
      g.n_layer * rwkv + (g.n_layer > 0 ? g.n_layer - 1 : 0) * value_lora + g.n_attn * attention;
  const double head = static_cast<double>(g.vocab) * C / n_prompt;
  return 2 * (per_token + head);
}

double decode_flops_per_token(const Geometry& g) {
  return prefill_flops_per_token(g, 1);
}

double batch_decode_limit_tokens_per_s(int rows, double flops_per_token, double flops_per_s,
                                       double bytes_per_step, double bytes_per_s) {
  // (Written so that a NaN argument also gives 0.)
  if (rows < 1 || !(flops_per_token > 0) || !(flops_per_s > 0) || !(bytes_per_step > 0) ||
      !(bytes_per_s > 0))
    return 0;
  const double step_s =
      std::max(rows * flops_per_token / flops_per_s, bytes_per_step / bytes_per_s);
  return rows / step_s;
}

}  // namespace wick::bench
