#include "launch/config/option_kinds.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace strata::launch {

absl::StatusOr<DataKind> ParseDataKind(absl::string_view name) {
  if (name == "markov") return DataKind::kMarkov;
  if (name == "bytes") return DataKind::kBytes;
  if (name == "uint16") return DataKind::kUint16;
  if (name == "uint32") return DataKind::kUint32;
  if (name == "text") return DataKind::kText;
  return absl::InvalidArgumentError(absl::StrCat(
      "--data: must be markov, bytes, uint16, uint32 or text, got '", name,
      "'"));
}

absl::string_view DataKindName(DataKind kind) {
  switch (kind) {
    case DataKind::kMarkov:
      return "markov";
    case DataKind::kBytes:
      return "bytes";
    case DataKind::kUint16:
      return "uint16";
    case DataKind::kUint32:
      return "uint32";
    case DataKind::kText:
      return "text";
  }
  return "unknown";
}

absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "cosine") return LrScheduleKind::kCosine;
  if (name == "linear") return LrScheduleKind::kLinear;
  if (name == "step") return LrScheduleKind::kStep;
  if (name == "warmup_lr") return LrScheduleKind::kWarmupLr;
  if (name == "warmup_decay_lr") return LrScheduleKind::kWarmupDecayLr;
  if (name == "warmup_cosine_lr") return LrScheduleKind::kWarmupCosineLr;
  return absl::InvalidArgumentError(
      absl::StrCat("--lr_schedule: must be constant, cosine, linear, step, "
                   "warmup_lr, warmup_decay_lr or warmup_cosine_lr, got '",
                   name, "'"));
}

absl::string_view LrScheduleKindName(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kLinear:
      return "linear";
    case LrScheduleKind::kStep:
      return "step";
    case LrScheduleKind::kWarmupLr:
      return "warmup_lr";
    case LrScheduleKind::kWarmupDecayLr:
      return "warmup_decay_lr";
    case LrScheduleKind::kWarmupCosineLr:
      return "warmup_cosine_lr";
  }
  return "unknown";
}

bool IsDeepSpeedSchedule(LrScheduleKind kind) {
  return kind == LrScheduleKind::kWarmupLr ||
         kind == LrScheduleKind::kWarmupDecayLr ||
         kind == LrScheduleKind::kWarmupCosineLr;
}

absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(absl::string_view name) {
  if (name == "full") return CheckpointFormat::kFull;
  if (name == "local") return CheckpointFormat::kLocal;
  if (name == "sharded") return CheckpointFormat::kSharded;
  return absl::InvalidArgumentError(absl::StrCat(
      "--ckpt_format must be full, local or sharded, got '", name, "'"));
}

absl::string_view CheckpointFormatName(CheckpointFormat format) {
  switch (format) {
    case CheckpointFormat::kFull:
      return "full";
    case CheckpointFormat::kLocal:
      return "local";
    case CheckpointFormat::kSharded:
      return "sharded";
  }
  return "unknown";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  return absl::InvalidArgumentError(absl::StrCat(
      "--precision: must be fp32, bf16 or fp16, got '", name, "'"));
}

absl::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "unknown";
}

}  // namespace strata::launch
