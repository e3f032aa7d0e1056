#include "text/byte_level.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata::text {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ByteLevelTest, SpellsGpt2sAlphabet) {
  EXPECT_EQ(ByteLevelCodePoint('a'), 'a');
  EXPECT_EQ(ByteLevelCodePoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(ByteLevelCodePoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(ByteLevelCodePoint(0), 0x100u);
  EXPECT_EQ(ByteLevelCodePoint(0xAD), 0x143u);  // The last of the 68 moved.
  EXPECT_EQ(ByteLevelSpell(" hi\n"), "\xC4\xA0hi\xC4\x8A");  // "Ġhi\u010A"
}

TEST(ByteLevelTest, UnspellInvertsSpellForEveryByte) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  absl::StatusOr<std::string> back = ByteLevelUnspell(ByteLevelSpell(bytes));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);
}

TEST(ByteLevelTest, UnspellRefusesCharactersOutsideTheAlphabet) {
  EXPECT_THAT(ByteLevelUnspell("ab\xE2\x82\xAC"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("U+20AC at byte 2")));
  EXPECT_THAT(
      ByteLevelUnspell(" "),  // The space byte is spelled Ġ.
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("U+0020")));
}

}  // namespace
}  // namespace strata::text
