// The user's documentation stands on its own: it is shipped without the repository it was
// planned in, so it must not send the reader there (issue 36).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gotap {
namespace {

TEST(Docs, NoReferenceToThePlanningRepository) {
  const std::filesystem::path root = GOTAP_SOURCE_DIR;
  std::vector<std::filesystem::path> pages = {root / "README.md"};
  for (const auto& e : std::filesystem::recursive_directory_iterator(root / "docs"))
    if (e.is_regular_file()) pages.push_back(e.path());
  ASSERT_GT(pages.size(), 4u);
  for (const auto& p : pages) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (const char* ref :
         {"planning repository", "CONTRACT.md", "DESIGN.md", "STYLE.md", "shared/", "../shared"})
      EXPECT_EQ(text.find(ref), std::string::npos) << p << " refers to " << ref;
  }
}

}  // namespace
}  // namespace gotap
