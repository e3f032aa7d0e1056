// The generated code-point tables behind text/unicode.h (unicode_tables.cc,
// written by text/testing/gen_unicode_tables.js): sorted, disjoint, inclusive
// ranges. Internal to //text:unicode.
#ifndef STRATA_TEXT_UNICODE_TABLES_H_
#define STRATA_TEXT_UNICODE_TABLES_H_

#include <cstdint>

namespace strata::text::internal {

struct CodePointRange {
  uint32_t first;
  uint32_t last;
};

// General category L (Lu, Ll, Lt, Lm, Lo).
extern const CodePointRange kLetterRanges[];
extern const int kLetterRangesSize;
// General category N (Nd, Nl, No).
extern const CodePointRange kNumberRanges[];
extern const int kNumberRangesSize;
// The White_Space property (what \s means in Rust's regex and Oniguruma).
extern const CodePointRange kWhiteSpaceRanges[];
extern const int kWhiteSpaceRangesSize;

}  // namespace strata::text::internal

#endif  // STRATA_TEXT_UNICODE_TABLES_H_
