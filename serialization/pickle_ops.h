#ifndef STRATA_SERIALIZATION_PICKLE_OPS_H_
#define STRATA_SERIALIZATION_PICKLE_OPS_H_

// The byte level of a pickle (protocols 2 to 5): each opcode with its
// argument decoded. The two unpicklers (pickle_reader: torch.save's data
// into IValues; object_pickle: any object into a tree of class names) share
// it and differ only in what an opcode does to their stack.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace strata::serialization {

// One opcode and its argument.
struct PickleOp {
  uint8_t code = 0;
  // BININT1 / BININT2 / BININT / LONG1's value (LONG1: at most 8 bytes,
  // sign-extended), PROTO's protocol, FRAME's size, and the memo index of
  // BINPUT / LONG_BINPUT / BINGET / LONG_BINGET.
  int64_t integer = 0;
  double real = 0;  // BINFLOAT's value.
  // The bytes of BINUNICODE / SHORT_BINUNICODE / BINUNICODE8 /
  // SHORT_BINBYTES / BINBYTES / BINBYTES8; GLOBAL's "module.name"
  // (Python 2's __builtin__ spelled builtins).
  std::string text;
};

// Reads the opcodes of one pickle in order. Borrows `pickle` and `where`,
// which must outlive it. Not thread-safe.
class PickleDecoder {
 public:
  PickleDecoder(absl::string_view pickle, const std::string& where)
      : pickle_(pickle), where_(where) {}

  // The next opcode and its argument. An opcode without an argument, or one
  // this decoder does not know (its interpreter refuses it), is returned
  // with its code alone. Errors (Error's form): a truncated pickle, a LONG1
  // wider than 64 bits.
  absl::Status Next(PickleOp* op);

  // InvalidArgument "<where>: <message> (opcode 0xNN, at pickle byte N)",
  // the opcode being the one Next returned last (none before the first).
  absl::Status Error(absl::string_view message) const;

 private:
  template <typename T>
  absl::Status Read(T* value);
  absl::Status ReadBytes(uint64_t n, std::string* out);
  absl::Status ReadLine(std::string* out);

  absl::string_view pickle_;
  const std::string& where_;
  size_t pos_ = 0;
  int opcode_ = -1;  // The opcode being decoded or executed, if any.
};

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_PICKLE_OPS_H_
