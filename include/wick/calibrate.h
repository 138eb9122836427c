// `wick calibrate`: a per-checkpoint quantisation config chosen by measurement
// (docs/rwkvq-format.md §3.8, rwkv-quant's calibrate()).
//
// What it does. For each parameter group of §1.5 (proj, w_lora, a_lora, v_lora, g_lora, small,
// cmix, emb, head) that has tensors the writer would quantise, a list of candidate schemes is
// built from the tensor shapes and ordered by cost (bits per weight), cheapest first:
//   * sb6 at 4, 5, 6 bits (block 32) in the modes asym_sb6, asym_sb6_search and - when
//     activation statistics cover every tensor of the group - asym_sb6_aw, if every quantised
//     tensor of the group is 2-D and its row length IN (the stored last axis, the axis the
//     writer blocks) is a multiple of 256; cost 4.5 / 5.5 / 6.5 bits;
//   * asym at 8 bits, block 64, if every tensor is 2-D with IN >= 64; cost 9.0 bits;
//   * per-row rtn at 8 and at 4 bits, always (activation-weighted by the writer where the
//     statistics hold the key); cost bits + 16 / IN;
//   * a group with a tensor that is not 2-D (`small`: k_k, k_a are [1, 1, C]) gets rtn@8 only.
// IN is the smallest row length over the group. The list is sorted by (cost, rtn last, more bits
// first), stable. sym is not in the search space (as upstream).
//
// 1. Isolation pass: with every other group dense bf16, each candidate of a group is measured in
//    turn, cheapest first, until one is within the budget; that one is the group's choice. When
//    none is, the group stays dense bf16 (bits 16).
// 2. Composite pass (optional, on by default): all chosen schemes together are measured. While
//    the composite metric is over the budget (at most `max_composite_steps` steps), the group
//    with the largest (isolated metric of its choice / added bits) is upgraded to its next
//    candidate of strictly higher cost (or dense bf16 after the last one); the upgrade is kept
//    only if the composite metric improves, otherwise it is rolled back and the group frozen.
//    A kept upgrade to a candidate the isolation pass did not reach is then measured alone too,
//    so that the group's share of the error (the priority) follows its current scheme.
//    The composite pass is the only place where interactions between groups are seen: the
//    isolation pass assumes the groups' errors do not interact, which is only an approximation
//    (errors of different groups add up, roughly, and can amplify each other through the
//    recurrent state).
//
// Measurement. Every configuration is written to a temporary `.rwkvq` with the same writer as
// `wick quantize` (quant::quantize_checkpoint), so the measured model is exactly the file that
// `wick quantize --config` would write (unlike upstream's fake-quantisation, which blocks world
// LoRA along the other axis). The reference is the same writer's all-dense file (every group at
// 16 bits: the source rounded to bf16 as the writer stores it), so a candidate's number measures
// only the group under test. Metrics on the windows given (wick/perplexity.h protocol, each
// window from a zero state):
//   * kKl: KL(P_reference || Q_candidate), mean over windows of the per-window mean, nats/token;
//     within budget when <= max_kl;
//   * kPpl: delta ppl = 100 (ppl_candidate - ppl_reference) / ppl_reference, in %; within budget
//     when <= ppl_threshold_pct (a negative delta is within any budget >= 0).
// Cost: one file write, one model load and one pass over the windows (two for KL: the reference
// is run again) per measured configuration (at most two per composite step); the temporary files go
// to `work_dir` and are removed after each measurement, so the disk must hold about twice the dense
// bf16 model.
//
// The config. Every group searched gets its chosen scheme (bits, group_scale, group_scale_mode:
// sb6 -> group_scale 32 and its mode; asym -> 64, "asym"; rtn -> no group_scale) or bits 16;
// act_stats_path is the statistics file given (""= none). When the statistics were used, quantise
// with the same file (`wick quantize --config F --act-stats S`) to get the measured tensors.
//
// Thread-safety: reentrant; the writer and the passes use the global kernel thread pool, so
// concurrent calls follow the rules of concurrent Model::forward() calls (wick/model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace wick {

enum class CalibrationMetric {
  kKl,   // KL(dense || quantised), nats/token
  kPpl,  // delta perplexity, % of the dense perplexity
};

struct CalibrateOptions {
  CalibrationMetric metric = CalibrationMetric::kKl;
  double max_kl = 0.01;            // budget for kKl, nats/token, >= 0
  double ppl_threshold_pct = 5.0;  // budget for kPpl, %, >= 0 (rwkv-quant's default)
  std::string act_stats_path;      // E[x^2] safetensors (wick act-stats), "" = none
  bool composite = true;           // run the composite pass
  int max_composite_steps = 20;    // upgrades tried by the composite pass, >= 0
  std::string work_dir;            // folder for the temporary .rwkvq files, "" = system temp
};

// One candidate scheme of a group.
struct CalibrationCandidate {
  std::string layout;  // "sb6", "asym", "rtn"
  int bits = 0;
  std::string mode;             // group_scale_mode: asym_sb6, asym_sb6_search, asym_sb6_aw, asym;
                                // "rtn" for rtn (no group_scale)
  int group_scale = 0;          // sb6 32, asym 64, rtn 0
  double cost_bits = 0;         // bits per weight of the cost model
  bool measured = false;        // measured alone (all other groups dense bf16)
  bool from_composite = false;  // measured alone after the composite pass upgraded to it (not
                                // by the isolation pass, which stopped before it)
  double metric = 0;            // when measured: KL (nats/token) or delta ppl (%), per the options
  double kl = 0;                // kKl only: mean KL (nats/token) and its 95 % bootstrap interval
  double kl_ci_low = 0, kl_ci_high = 0;
  double ppl = 0;  // kPpl only: perplexity of the candidate
  bool within_budget = false;

  std::string label() const;  // "sb6@5 asym_sb6_search", "asym@8 gs64", "rtn@8"
};

struct CalibrationGroup {
  std::string group;
  std::vector<std::string> tensors;  // keys the writer quantises in this group
  int64_t weights = 0;               // their element count
  int64_t min_in = 0;                // smallest row length (stored last axis; rank > 2 -> 0)
  std::vector<CalibrationCandidate> candidates;  // in cost order
  int isolated_choice = -1;  // index into candidates chosen by the isolation pass; -1 = bf16
  int final_choice = -1;     // after the composite pass; -1 = bf16

  // The final scheme's label, or "bf16".
  std::string choice_label() const;
};

// One upgrade tried by the composite pass.
struct CalibrationStep {
  std::string group;
  std::string from, to;  // labels ("bf16" for dense)
  double before = 0;     // composite metric before and with the upgrade
  double after = 0;
  bool kept = false;  // false: rolled back and the group frozen
};

struct CalibrationResult {
  std::string config_json;  // the §1.3.2 config object (QuantConfig::from_json accepts it)
  std::vector<CalibrationGroup> groups;  // groups with quantisable tensors, in §1.5 order
  CalibrationMetric metric = CalibrationMetric::kKl;
  double budget = 0;             // max_kl or ppl_threshold_pct
  double reference_ppl = 0;      // ppl of the all-dense reference (kPpl only)
  bool composite_run = false;    // the composite pass measured something
  double composite_initial = 0;  // composite metric of the isolated choices
  double composite_final = 0;    // and after the upgrades
  bool composite_within_budget = true;
  std::vector<CalibrationStep> steps;
  int64_t windows = 0;
  int64_t positions = 0;              // scored positions per measurement
  int64_t evaluations = 0;            // configurations measured (the reference included)
  std::vector<std::string> warnings;  // from the writer (unique), e.g. fallbacks

  // {"config": <config>, "calibration_report": {...}}: what `wick calibrate` writes; `wick
  // quantize --config` reads the "config" key of such an object.
  std::string to_json_text() const;
};

// Called from the calling thread after each measured configuration: `stage` is "isolation" or
// "composite", `done` of `total` (an upper bound: groups stop at their first candidate within the
// budget, and `done` then jumps over the candidates left out). Must not throw.
using CalibrationProgress =
    std::function<void(const std::string& stage, int64_t done, int64_t total)>;

// Searches a config for the dense checkpoint `model_path` (.safetensors, official .pth, or a
// folder with model.safetensors) on pre-cut token windows (each of >= 2 tokens; e.g. from
// cut_windows() in wick/perplexity.h).
// Throws InputError (no window, a window of < 2 tokens or an id outside the vocabulary, a budget
// < 0 or NaN, max_composite_steps < 0), FileError (checkpoint, statistics or work_dir cannot be
// read / written), FormatError and CheckpointError (as wick::quantize: not a dense float RWKV-7
// checkpoint), EvaluationError (a measurement gave a non-finite number).
CalibrationResult calibrate(const std::string& model_path,
                            std::span<const std::vector<int32_t>> windows,
                            const CalibrateOptions& options,
                            const CalibrationProgress& progress = {});

// Writes result.to_json_text() to `path` atomically (temporary file in the same folder, renamed
// over `path`). Throws FileError when it cannot be written.
void save_calibration(const std::string& path, const CalibrationResult& result);

}  // namespace wick
