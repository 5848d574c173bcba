// The replica registry's text and rules (replica_registry.h): what the
// stores keep, and how two replicas' settings compare.
#include <gtest/gtest.h>

#include <stdexcept>

#include "fleetcron/job_catalogue.h"
#include "fleetcron/replica_registry.h"
#include "fleetcron/backend/record_formats.h"

namespace fleetcron {
namespace {

using namespace std::chrono_literals;

ReplicaRecord sample() {
  ReplicaRecord record;
  record.replica.replica_id = "web-1";
  record.replica.host = "host with space%";
  record.replica.pid = 4242;
  record.replica.version = "0.9.0";
  record.replica.started = Instant{1767322800123456us};
  record.replica.jobs_digest = "00ff00ff00ff00ff";
  record.replica.settings = {{"claim_ttl", "30s"}, {"claim_prefix", "cron:claim:"}, {"empty", ""}};
  record.replica.runs = {{"nightly report", "nightly report@2026-01-02T03:00:00Z", Instant{1767322800000000us}, 17,
                          Instant{1767322800250000us}, 1, true}};
  record.beat = Instant{1767322805000000us};
  record.expires_at = Instant{1767322820000000us};
  record.accepted = true;
  return record;
}

TEST(ReplicaRegistry, TheTextRoundTripsEveryField) {
  ReplicaRecord bare;
  bare.replica.replica_id = "bare";
  const std::vector<ReplicaRecord> records{sample(), bare};
  const std::string text = format_replica_registry(records);
  EXPECT_EQ(text.find('\n'), text.rfind('\n')) << "one line per replica: " << text;
  EXPECT_EQ(text.substr(text.find('\n') + 1), "1 bare - 0 - 0 0 0 0 - 0 0");
  const auto parsed = parse_replica_registry(text);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, records);
  ASSERT_TRUE(parse_replica_registry(""));
  EXPECT_TRUE(parse_replica_registry("")->empty());
}

TEST(ReplicaRegistry, AMalformedLineIsNotARegistry) {
  const std::string good = format_replica_registry(std::vector<ReplicaRecord>{sample()});
  for (const std::string& bad : {std::string("2") + good.substr(1),  // another format version
                                good + " extra",                     // a field too many
                                good.substr(0, good.rfind(' ')),     // one too few
                                std::string("1 x - 0 - 0 0 0 2 - 0 0"),  // accepted neither 0 nor 1
                                std::string("1 - - 0 - 0 0 0 0 - 0 0"),  // no id
                                std::string("1 x - pid - 0 0 0 0 - 0 0"),
                                std::string("1 x - 0 - 0 0 0 0 - 0"),  // no run count
                                std::string("1 x - 0 - 0 0 0 0 - 0 1 job - 0 0 0 0 0")}) {  // a run without a fire key
    EXPECT_FALSE(parse_replica_registry(bad)) << bad;
    EXPECT_FALSE(parse_replica_registry(good + "\n" + bad)) << bad;
  }
}

TEST(ReplicaRegistry, TheFingerprintIgnoresOrderButNotValues) {
  const std::vector<ReplicaSetting> a{{"claim_ttl", "30s"}, {"mode", "claim"}};
  const std::vector<ReplicaSetting> b{{"mode", "claim"}, {"claim_ttl", "30s"}};
  const std::vector<ReplicaSetting> c{{"claim_ttl", "31s"}, {"mode", "claim"}};
  EXPECT_EQ(settings_fingerprint(a), settings_fingerprint(b));
  EXPECT_NE(settings_fingerprint(a), settings_fingerprint(c));
  EXPECT_EQ(settings_fingerprint(a).size(), 16u);
  // A name and value cannot run into each other.
  EXPECT_NE(settings_fingerprint(std::vector<ReplicaSetting>{{"ab", "c"}}),
            settings_fingerprint(std::vector<ReplicaSetting>{{"a", "bc"}}));
}

TEST(ReplicaRegistry, ComparingSettingsNamesEachDifferenceOnce) {
  const std::vector<ReplicaSetting> here{{"claim_ttl", "30s"}, {"mode", "claim"}, {"only_here", "1"}};
  const std::vector<ReplicaSetting> fleet{{"mode", "claim"}, {"claim_ttl", "1m"}, {"only_there", "2"}};
  const std::vector<SettingDifference> expected{
      {"claim_ttl", "30s", "1m"}, {"only_here", "1", ""}, {"only_there", "", "2"}};
  EXPECT_EQ(compare_settings(here, fleet), expected);
  EXPECT_TRUE(compare_settings(here, here).empty());
}

TEST(ReplicaRegistry, AnAnnouncementOutsideTheBoundsIsRejectedByField) {
  auto rejected = [](ReplicaAnnouncement replica) -> std::string {
    try {
      check_replica_announcement(replica);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  ReplicaAnnouncement good = sample().replica;
  EXPECT_EQ(rejected(good), "accepted");
  ReplicaAnnouncement r = good;
  r.replica_id = "two words";
  EXPECT_NE(rejected(r).find("replica id \"two words\""), std::string::npos) << rejected(r);
  r = good;
  r.host = std::string(256, 'h');
  EXPECT_NE(rejected(r).find("host is 256 bytes, more than 255"), std::string::npos) << rejected(r);
  r = good;
  r.settings.push_back({"claim_ttl", "1m"});
  EXPECT_NE(rejected(r).find("setting claim_ttl is given twice"), std::string::npos) << rejected(r);
  r = good;
  r.settings.push_back({"", "x"});
  EXPECT_NE(rejected(r).find("setting 4 is named \"\""), std::string::npos) << rejected(r);
  r = good;
  r.settings.assign(max_replica_settings + 1, {"n", "v"});
  EXPECT_NE(rejected(r).find("33 settings, more than 32"), std::string::npos) << rejected(r);
}

TEST(JobCatalogue, TheTextRoundTripsEveryFieldAndRefusesOthers) {
  const std::vector<CataloguedJob> jobs{{"nightly report", "TZ=Europe/Paris 0 3 * * *", "Europe/Paris", false,
                                         Instant{1767322800123456us}, "web-1"},
                                        {"tick", "", "UTC", true, Instant{1767322800000000us}, "", false},
                                        {"warm", "*/5 * * * *", "UTC", false, Instant{1767322800000000us}, "web-2", true},
                                        {"zgone", "@daily", "UTC", false, Instant{1767322800000000us}, "web-2", false,
                                         Instant{1767322900000000us}}};
  const std::string text = format_job_catalogue(jobs);
  // A fleet job keeps the line every earlier release reads; a job every
  // replica runs says so in a version-2 line.
  EXPECT_NE(text.find("\n1 tick - UTC 1 1767322800000000 -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n2 warm */5%20*%20*%20*%20* UTC 0 1767322800000000 web-2 replica\n"), std::string::npos) << text;
  // A removed job: a version-3 line with its scope and when it was removed.
  EXPECT_EQ(text.substr(text.rfind('\n') + 1), "3 zgone @daily UTC 0 1767322800000000 web-2 fleet 1767322900000000");
  const auto parsed = parse_job_catalogue(text);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, jobs);
  for (const char* bad : {"1 tick - UTC 2 0 -", "1 - - UTC 1 0 -", "1 tick - UTC 1 - -", "2 tick - UTC 1 0 -",
                          "1 tick - UTC 1 0", "1 tick - UTC 1 0 - replica", "2 tick - UTC 1 0 - fleet", "3 tick - UTC 1 0 - replica",
                          "3 tick - UTC 1 0 - all 5", "3 tick - UTC 1 0 - fleet -"}) {
    EXPECT_FALSE(parse_job_catalogue(bad)) << bad;
  }
}

}  // namespace
}  // namespace fleetcron
