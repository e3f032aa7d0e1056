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
