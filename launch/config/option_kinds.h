// The enumerated options of the train binary (TrainOptions in
// launch/train/trainer.h): data kind, learning-rate schedule, checkpoint format
// and precision. Each has a Parse function from its flag's spelling, whose
// error names the flag and lists the accepted values, and a Name function back
// to that spelling (Parse(Name(x)) == x). Pure functions, callable anywhere.
#ifndef STRATA_LAUNCH_CONFIG_OPTION_KINDS_H_
#define STRATA_LAUNCH_CONFIG_OPTION_KINDS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::launch {

// --data: where the tokens come from.
enum class DataKind {
  kMarkov,  // The synthetic Markov corpus (known entropy floor).
  kBytes,   // A text file, one token per byte (vocabulary 256).
  kUint16,  // A token-bin file of uint16 ids.
  kUint32,  // A token-bin file of uint32 ids.
  kText,    // A text file through --tokenizer (text/load_tokenizer.h).
};
absl::StatusOr<DataKind> ParseDataKind(absl::string_view name);
absl::string_view DataKindName(DataKind kind);

// --lr_schedule: the learning rate after linear warm-up, or one of
// DeepSpeed's warm-up schedules (optim/lr_schedule.h).
enum class LrScheduleKind {
  kConstant,
  kCosine,
  kLinear,
  kStep,
  kWarmupLr,        // "warmup_lr": DeepSpeed's WarmupLR.
  kWarmupDecayLr,   // "warmup_decay_lr": DeepSpeed's WarmupDecayLR.
  kWarmupCosineLr,  // "warmup_cosine_lr": DeepSpeed's WarmupCosineLR.
};
absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name);
absl::string_view LrScheduleKindName(LrScheduleKind kind);
// kWarmupLr, kWarmupDecayLr or kWarmupCosineLr.
bool IsDeepSpeedSchedule(LrScheduleKind kind);

// --ckpt_format: how training checkpoints are written.
enum class CheckpointFormat {
  kFull,     // One PyTorch file written by rank 0.
  kLocal,    // One file per rank; same world size and strategy to load.
  kSharded,  // A data file per rank plus metadata; loads under any world.
};
absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(absl::string_view name);
absl::string_view CheckpointFormatName(CheckpointFormat format);

// --precision: fp32, or bf16 autocast (bf16 matmuls over fp32 weights).
enum class Precision { kFp32, kBf16, kFp16 };
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
absl::string_view PrecisionName(Precision precision);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_CONFIG_OPTION_KINDS_H_
