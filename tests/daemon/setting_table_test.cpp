// The setting table: each setting declared once, and the flags, the TOML
// reader and the environment all read through it, with the same checks
// and errors that name where the value came from.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "daemon/config/setting_table.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

std::size_t index_of(std::string_view key) {
  const auto specs = setting_table();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].key == key) return i;
  }
  ADD_FAILURE() << "no setting " << key;
  return 0;
}

std::string error_of(const CommandLineSettings& given) {
  try {
    (void)build_settings(given);
  } catch (const SettingsError& e) {
    return e.what();
  }
  return "";
}

TEST(SettingTable, EachSettingIsDeclaredOnceWithHelpAndAUniqueKeyAndFlag) {
  std::set<std::string_view> keys, flags;
  for (const SettingSpec& spec : setting_table()) {
    EXPECT_TRUE(keys.insert(spec.key).second) << spec.key;
    if (!spec.flag.empty()) {
      EXPECT_TRUE(flags.insert(spec.flag).second) << spec.flag;
    }
    EXPECT_FALSE(spec.help.empty()) << spec.key;
    EXPECT_FALSE(spec.group.empty()) << spec.key;
    EXPECT_NE(spec.apply, nullptr) << spec.key;
    EXPECT_EQ(find_setting(spec.key), &spec);
  }
  EXPECT_GE(keys.size(), 40U);
}

TEST(SettingTable, FlagsWinOverTheFileAndTheEnvironmentSitsBetween) {
  const std::string path = ::testing::TempDir() + "setting_table.toml";
  {
    std::FILE* file = std::fopen(path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("replica_id = \"from-file\"\nmax_concurrent = 8\n[claim]\nttl = \"2m\"\n", file);
    std::fclose(file);
  }
  CommandLineSettings given;
  given.config = path;
  given.given[index_of("claim.ttl")].text = "3m";
  given.given[index_of("seconds")].on = true;
  ::setenv("FLEETCRON_REPLICA_ID", "from-environment", 1);
  Settings settings = build_settings(given);
  EXPECT_EQ(settings.replica_id, "from-environment");
  EXPECT_EQ(settings.max_concurrent, 8U);
  EXPECT_EQ(settings.claim_ttl, 3min);
  EXPECT_TRUE(settings.seconds);
  given.given[index_of("replica_id")].text = "from-flag";
  settings = build_settings(given);
  ::unsetenv("FLEETCRON_REPLICA_ID");
  EXPECT_EQ(settings.replica_id, "from-flag");
}

TEST(SettingTable, AFlagsBadValueNamesTheOptionAndTheValue) {
  CommandLineSettings given;
  given.given[index_of("fleet.history")].text = "20000";
  EXPECT_EQ(error_of(given), "option --history \"20000\": must be an integer from 0 to 10000");
  given = {};
  given.given[index_of("max_concurrent")].text = "8x";
  EXPECT_EQ(error_of(given), "option --max-concurrent \"8x\": must be an integer from 1 to 4096");
  given = {};
  given.given[index_of("on_leadership_loss")].text = "later";
  EXPECT_EQ(error_of(given), "option --on-leadership-loss \"later\": expected cancel or finish");
  given = {};
  given.given[index_of("claim.ttl")].text = "0s";
  EXPECT_EQ(error_of(given), "option --claim-ttl \"0s\": must be positive");
}

TEST(SettingTable, AFileNamesTheLineTheKeyAndWhatIsWrong) {
  const auto error_of_text = [](std::string_view text) {
    Settings settings;
    try {
      apply_config_text(text, "c.toml", settings);
    } catch (const SettingsError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of_text("\n[fleet]\nhistory = -1\n"), "c.toml:3: fleet.history: must be an integer from 0 to 10000");
  EXPECT_EQ(error_of_text("seconds = \"yes\"\n"), "c.toml:1: seconds \"yes\": must be true or false");
  EXPECT_EQ(error_of_text("claim = 3\n"), "c.toml:1: [claim] must be a table");
  EXPECT_EQ(error_of_text("zone = 1.5\n"),
            "c.toml:1: zone: must be a string, an integer, true or false, or a list of strings");
  EXPECT_EQ(error_of_text("[defaults]\nnotify = \"ftp://x\"\n"),
            "c.toml:2: defaults.notify \"ftp://x\": must be an http:// or https:// URL");
  EXPECT_NE(error_of_text("[leader]\ncolour = 1\n").find("c.toml:2: unknown key leader.colour (known in [leader]: ttl, key, bucket)"),
            std::string::npos);
  EXPECT_EQ(error_of_text("max_concurrent = \"8\"\n"), "c.toml:1: max_concurrent \"8\": must be an integer from 1 to 4096")
      << "a number in the file is a TOML integer; only a flag spells it";
  EXPECT_NE(error_of_text("\"claim.ttl\" = \"1m\"\n").find("c.toml:1: unknown key \"claim.ttl\""), std::string::npos);
  EXPECT_EQ(error_of_text("store_wait = 0\n"), "");
  EXPECT_EQ(error_of_text("store_wait = 5\n"), "c.toml:1: store_wait: must be a duration string, or 0");
}

TEST(SettingTable, TheDocsTablesListEveryFlag) {
  const std::string markdown = settings_markdown();
  const std::string man = settings_man();
  for (const SettingSpec& spec : setting_table()) {
    EXPECT_NE(markdown.find(fmt::format("`{}`", spec.key)), std::string::npos) << spec.key;
    if (spec.flag.empty() || spec.flag == "jobs") continue;
    std::string escaped;
    for (const char c : spec.flag) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_NE(man.find(escaped), std::string::npos) << spec.flag;
  }
}

}  // namespace
}  // namespace fleetcron::daemon
