// The enumerated options of the train binary (TrainOptions in
// launch/train/trainer.h): data kind and precision (the
// learning-rate schedule's kind is optim/lr_schedule.h's, the checkpoint
// format checkpoint/format.h's). Each has a Parse function from its flag's
// spelling, whose error names the flag and lists the accepted values, and a
// Name function back to that spelling (Parse(Name(x)) == x). Pure functions,
// callable anywhere.
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

// --precision: fp32, or bf16 autocast (bf16 matmuls over fp32 weights).
enum class Precision { kFp32, kBf16, kFp16 };
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
absl::string_view PrecisionName(Precision precision);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_CONFIG_OPTION_KINDS_H_
