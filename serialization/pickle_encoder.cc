#include "serialization/pickle_encoder.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace strata::serialization {
namespace {

// Appends `value`'s low `n` bytes, least significant first.
void AppendLittleEndian(uint64_t value, int n, std::string* out) {
  for (int i = 0; i < n; ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

}  // namespace

PickleEncoder::PickleEncoder() { out_ = "\x80\x02"; }  // PROTO 2

void PickleEncoder::Global(absl::string_view module, absl::string_view name) {
  absl::StrAppend(&out_, "c", module, "\n", name, "\n");  // GLOBAL
}

void PickleEncoder::None() { out_.push_back('N'); }

void PickleEncoder::Bool(bool value) {
  out_.push_back(value ? '\x88' : '\x89');  // NEWTRUE / NEWFALSE
}

void PickleEncoder::Int(int64_t value) {
  if (value >= std::numeric_limits<int32_t>::min() &&
      value <= std::numeric_limits<int32_t>::max()) {
    out_.push_back('J');  // BININT: 4 bytes, signed
    AppendLittleEndian(static_cast<uint32_t>(static_cast<int32_t>(value)), 4,
                       &out_);
    return;
  }
  out_.push_back('\x8a');  // LONG1: a length, then two's complement bytes
  out_.push_back('\x08');
  AppendLittleEndian(static_cast<uint64_t>(value), 8, &out_);
}

void PickleEncoder::Float(double value) {
  out_.push_back('G');  // BINFLOAT: a big-endian IEEE 754 double
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  for (int i = 7; i >= 0; --i) {
    out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
}

void PickleEncoder::String(absl::string_view utf8) {
  out_.push_back('X');  // BINUNICODE: a 4-byte length, then the bytes
  AppendLittleEndian(utf8.size(), 4, &out_);
  out_.append(utf8.data(), utf8.size());
}

void PickleEncoder::Mark() { out_.push_back('('); }
void PickleEncoder::Tuple() { out_.push_back('t'); }
void PickleEncoder::EmptyTuple() { out_.push_back(')'); }
void PickleEncoder::EmptyList() { out_.push_back(']'); }
void PickleEncoder::EmptyDict() { out_.push_back('}'); }
void PickleEncoder::SetItems() { out_.push_back('u'); }
void PickleEncoder::Appends() { out_.push_back('e'); }
void PickleEncoder::NewObj() { out_.push_back('\x81'); }
void PickleEncoder::Reduce() { out_.push_back('R'); }
void PickleEncoder::Build() { out_.push_back('b'); }

std::string PickleEncoder::Finish() {
  out_.push_back('.');  // STOP
  return std::move(out_);
}

}  // namespace strata::serialization
