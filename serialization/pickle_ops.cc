#include "serialization/pickle_ops.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"

namespace strata::serialization {

template <typename T>
absl::Status PickleDecoder::Read(T* value) {
  if (pickle_.size() - pos_ < sizeof(T)) return Error("truncated pickle");
  std::memcpy(value, pickle_.data() + pos_, sizeof(T));  // little-endian host
  pos_ += sizeof(T);
  return absl::OkStatus();
}

absl::Status PickleDecoder::ReadBytes(uint64_t n, std::string* out) {
  if (pickle_.size() - pos_ < n) return Error("truncated pickle");
  out->assign(pickle_.data() + pos_, n);
  pos_ += n;
  return absl::OkStatus();
}

absl::Status PickleDecoder::ReadLine(std::string* out) {
  const size_t end = pickle_.find('\n', pos_);
  if (end == absl::string_view::npos) return Error("truncated pickle");
  out->assign(pickle_.data() + pos_, end - pos_);
  pos_ = end + 1;
  return absl::OkStatus();
}

absl::Status PickleDecoder::Error(absl::string_view message) const {
  const std::string opcode =
      opcode_ < 0 ? "" : absl::StrFormat("opcode 0x%02x, ", opcode_);
  return absl::InvalidArgumentError(absl::StrCat(
      where_, ": ", message, " (", opcode, "at pickle byte ", pos_, ")"));
}

absl::Status PickleDecoder::Next(PickleOp* op) {
  opcode_ = -1;
  *op = PickleOp();
  STRATA_RETURN_IF_ERROR(Read(&op->code));
  opcode_ = op->code;
  switch (op->code) {
    case 0x80:   // PROTO
    case 'K':    // BININT1
    case 'q':    // BINPUT
    case 'h': {  // BINGET
      uint8_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      op->integer = value;
      return absl::OkStatus();
    }
    case 'M': {  // BININT2
      uint16_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      op->integer = value;
      return absl::OkStatus();
    }
    case 'J': {  // BININT
      int32_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      op->integer = value;
      return absl::OkStatus();
    }
    case 'r':    // LONG_BINPUT
    case 'j': {  // LONG_BINGET
      uint32_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      op->integer = value;
      return absl::OkStatus();
    }
    case 0x95: {  // FRAME
      uint64_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      op->integer = static_cast<int64_t>(value);
      return absl::OkStatus();
    }
    case 0x8a: {  // LONG1: little-endian two's complement
      uint8_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      if (n > 8) return Error("integer wider than 64 bits");
      std::string bytes;
      STRATA_RETURN_IF_ERROR(ReadBytes(n, &bytes));
      uint64_t value = 0;
      for (int i = n - 1; i >= 0; --i) {
        value = (value << 8) | static_cast<uint8_t>(bytes[i]);
      }
      if (n > 0 && n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80)) {
        value |= ~uint64_t{0} << (8 * n);  // sign-extend
      }
      op->integer = static_cast<int64_t>(value);
      return absl::OkStatus();
    }
    case 'G': {  // BINFLOAT: big-endian double
      std::string bytes;
      STRATA_RETURN_IF_ERROR(ReadBytes(8, &bytes));
      uint64_t bits = 0;
      for (char c : bytes) bits = (bits << 8) | static_cast<uint8_t>(c);
      std::memcpy(&op->real, &bits, sizeof(op->real));
      return absl::OkStatus();
    }
    case 0x8c:   // SHORT_BINUNICODE
    case 'C': {  // SHORT_BINBYTES
      uint8_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return ReadBytes(n, &op->text);
    }
    case 'X':    // BINUNICODE
    case 'B': {  // BINBYTES
      uint32_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return ReadBytes(n, &op->text);
    }
    case 0x8d:    // BINUNICODE8
    case 0x8e: {  // BINBYTES8
      uint64_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return ReadBytes(n, &op->text);
    }
    case 'c': {  // GLOBAL
      std::string module, name;
      STRATA_RETURN_IF_ERROR(ReadLine(&module));
      STRATA_RETURN_IF_ERROR(ReadLine(&name));
      // Protocol 2 spells builtins the Python 2 way.
      if (module == "__builtin__") module = "builtins";
      op->text = absl::StrCat(module, ".", name);
      return absl::OkStatus();
    }
    default:
      return absl::OkStatus();
  }
}

}  // namespace strata::serialization
