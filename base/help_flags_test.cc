#include "base/help_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata {
namespace {

std::vector<std::string> Narrowed(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  NarrowHelp("launch/train/", static_cast<int>(argv.size()), argv.data());
  return std::vector<std::string>(argv.begin(), argv.end());
}

TEST(NarrowHelpTest, HelpBecomesHelpmatchOfTheSourcePath) {
  EXPECT_EQ(Narrowed({"train", "--help"}),
            (std::vector<std::string>{"train", "--helpmatch=launch/train/"}));
  EXPECT_EQ(Narrowed({"train", "-help"}),
            (std::vector<std::string>{"train", "--helpmatch=launch/train/"}));
}

TEST(NarrowHelpTest, OtherArgumentsStayAsTheyAre) {
  const std::vector<std::string> args = {"--help", "--helpfull", "--steps=3",
                                         "--helpmatch=x", "help"};
  // argv[0] is the program, never a flag.
  EXPECT_EQ(Narrowed(args),
            (std::vector<std::string>{"--help", "--helpfull", "--steps=3",
                                      "--helpmatch=x", "help"}));
}

TEST(NarrowHelpTest, ArgumentsAfterTheFlagsEndStayAsTheyAre) {
  EXPECT_EQ(Narrowed({"launch", "--help", "--", "prog", "--help"}),
            (std::vector<std::string>{"launch", "--helpmatch=launch/train/",
                                      "--", "prog", "--help"}));
}

}  // namespace
}  // namespace strata
