// The replica registry's part of the fleet-state contract
// (docs/fleet-state.md#replica-registry), instantiated for every backend
// with the rest of FleetStateContract.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "conformance/fleet_state_contract.h"
#include "fleetcron/backend/record_formats.h"
#include "support/time.h"

namespace fleetcron::test {

using namespace std::chrono_literals;

namespace {

constexpr std::chrono::nanoseconds ttl = 15s;

ReplicaAnnouncement replica(std::string id, std::string claim_ttl, Instant started) {
  ReplicaAnnouncement r;
  r.host = "host-" + id;
  r.replica_id = std::move(id);
  r.pid = 100;
  r.version = "test";
  r.started = started;
  r.jobs_digest = "jobs-1";
  r.settings = {{"claim_ttl", std::move(claim_ttl)}, {"mode", "claim"}};
  return r;
}

ReplicaAnnounce::Status status_of(const ReplicaAnnounce& answer) {
  EXPECT_NE(answer.status, ReplicaAnnounce::Status::error) << answer.error;
  return answer.status;
}

std::vector<std::string> ids(FleetState& state, Instant now) {
  const RegistryRead read = state.read_replicas(now);
  EXPECT_EQ(read.status, RegistryRead::Status::found) << read.error;
  std::vector<std::string> out;
  for (const auto& record : read.replicas) out.push_back(record.replica.replica_id + (record.accepted ? "+" : "-"));
  return out;
}

}  // namespace

// Fleet-wide overlap: an announcement alone with a job is `busy`, and
// writes nothing, while another live record lists a run of that job; this
// replica's own record, another job's run or an expired record does not block.
TEST_P(FleetStateContract, AnAnnouncementAloneWithAJobIsBusyWhileAnotherReplicaRunsIt) {
  using Status = ReplicaAnnounce::Status;
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const Instant now = real_now();
  ReplicaAnnouncement runner = replica("a", "30s", now);
  runner.runs = {RunningFire{"job", "job@1", now, 7, now, 0, false}};
  EXPECT_EQ(status_of(a->announce_replica(runner, now, ttl, "job")), Status::accepted);
  EXPECT_EQ(status_of(a->announce_replica(runner, now + 1s, ttl, "job")), Status::accepted) << "its own run";
  ReplicaAnnouncement next = replica("b", "30s", now);
  next.runs = {RunningFire{"job", "job@2", now + 2s, 8, now + 2s, 0, false}};
  const ReplicaAnnounce busy = b->announce_replica(next, now + 2s, ttl, "job");
  EXPECT_EQ(busy.status, Status::busy) << busy.error;
  EXPECT_EQ(busy.busy_on, "a");
  ASSERT_TRUE(busy.busy_run);
  EXPECT_EQ(busy.busy_run->fire_key, "job@1");
  EXPECT_EQ(busy.busy_run->fence, 7u);
  EXPECT_EQ(ids(*b, now + 2s), (std::vector<std::string>{"a+"})) << "nothing written";
  ReplicaAnnouncement other = next;
  other.runs.front().job_key = "other";
  EXPECT_EQ(status_of(b->announce_replica(other, now + 2s, ttl, "other")), Status::accepted);
  // a's record (last written at now + 1 s) expires at now + 1 s + ttl.
  const ReplicaAnnounce free = b->announce_replica(next, now + 1s + ttl + 1ms, ttl, "job");
  EXPECT_EQ(status_of(free), Status::accepted);
  ASSERT_EQ(free.expired.size(), 1u) << "the expired record goes, reported";
  EXPECT_EQ(free.expired.front().replica.runs.front().fire_key, "job@1");
  const ReplicaAnnounce back = a->announce_replica(runner, now + 2s + ttl, ttl, "job");
  EXPECT_EQ(back.status, Status::busy) << back.error;
  EXPECT_EQ(back.busy_on, "b");
}

// Several jobs alone in one announcement (runs starting together): a job
// another live record lists is answered busy and left out with its run;
// the others are written. When every one is busy, nothing is.
TEST_P(FleetStateContract, SeveralJobsAloneAtOnceWriteTheFreeOnesAndNameTheBusy) {
  using Status = ReplicaAnnounce::Status;
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const Instant now = real_now();
  ReplicaAnnouncement runner = replica("a", "30s", now);
  runner.runs = {RunningFire{"busy", "busy@1", now, 7, now, 0, false}};
  EXPECT_EQ(status_of(a->announce_replica(runner, now, ttl, "busy")), Status::accepted);
  ReplicaAnnouncement next = replica("b", "30s", now);
  next.runs = {RunningFire{"free", "free@2", now, 8, now, 0, false}, RunningFire{"busy", "busy@2", now, 9, now, 0, false}};
  const std::vector<std::string_view> both{"free", "busy"};
  const ReplicaAnnounce answer = b->announce_replica(next, now + 1s, ttl, both, FleetState::ExpiredRecords::report);
  EXPECT_EQ(status_of(answer), Status::accepted);
  ASSERT_EQ(answer.busy_jobs.size(), 1u);
  EXPECT_EQ(answer.busy_jobs.front().job_key, "busy");
  EXPECT_EQ(answer.busy_jobs.front().busy_on, "a");
  EXPECT_EQ(answer.busy_jobs.front().busy_run.fire_key, "busy@1");
  std::vector<std::string> listed;
  for (const auto& record : b->read_replicas(now + 1s).replicas) {
    for (const auto& run : record.replica.runs) listed.push_back(record.replica.replica_id + ":" + run.fire_key);
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"a:busy@1", "b:free@2"}));
  const ReplicaAnnounce refused = a->announce_replica(replica("c", "30s", now), now + 2s, ttl, both,  // both run elsewhere
                                                      FleetState::ExpiredRecords::report);
  EXPECT_EQ(refused.status, Status::busy) << "both run elsewhere: " << refused.error;
  EXPECT_EQ(refused.busy_jobs.size(), 2u);
  EXPECT_EQ(ids(*a, now + 2s), (std::vector<std::string>{"a+", "b+"})) << "nothing written";
}

// Runs asked alone that do not fit in the record (16 KiB: about five with
// 1 KiB keys and 2 KiB fire keys) are named unlisted, not written: the
// ones listed first are.
TEST_P(FleetStateContract, RunsAskedAloneBeyondTheRecordsBytesAreNamedUnlisted) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const Instant now = real_now();
  ReplicaAnnouncement many = replica("a", "30s", now);
  std::vector<std::string> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(std::string(1000, static_cast<char>('a' + i)));
  for (const auto& job : jobs) many.runs.push_back(RunningFire{job, job + std::string(1000, '@'), now, 1, now, 0, false});
  const std::vector<std::string_view> alone(jobs.begin(), jobs.end());
  const ReplicaAnnounce answer = a->announce_replica(many, now, ttl, alone, FleetState::ExpiredRecords::report);
  EXPECT_EQ(status_of(answer), ReplicaAnnounce::Status::accepted);
  ASSERT_FALSE(answer.unlisted_jobs.empty());
  const RegistryRead read = a->read_replicas(now);
  ASSERT_EQ(read.replicas.size(), 1u);
  const auto& listed = read.replicas.front().replica.runs;
  EXPECT_EQ(listed.size() + answer.unlisted_jobs.size(), jobs.size());
  for (std::size_t i = 0; i < listed.size(); ++i) EXPECT_EQ(listed[i].job_key, jobs[i]) << "the first ones";
  EXPECT_EQ(answer.unlisted_jobs.front(), jobs[listed.size()]);
}

TEST_P(FleetStateContract, TheFirstReplicasSettingsAreTheFleetsAndOthersAreRefused) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica(), c = fleet->replica();
  const Instant now = real_now();
  EXPECT_EQ(status_of(a->announce_replica(replica("a", "30s", now - 2s), now, ttl)), ReplicaAnnounce::Status::accepted);
  const ReplicaAnnounce same = b->announce_replica(replica("b", "30s", now - 3s), now, ttl);
  EXPECT_EQ(status_of(same), ReplicaAnnounce::Status::accepted);
  ASSERT_TRUE(same.reference);
  EXPECT_EQ(same.reference->replica.replica_id, "a");
  const ReplicaAnnounce other = c->announce_replica(replica("c", "1m", now - 4s), now, ttl);
  EXPECT_EQ(status_of(other), ReplicaAnnounce::Status::refused);
  ASSERT_TRUE(other.reference);
  EXPECT_EQ(other.reference->replica.replica_id, "b") << "the oldest accepted one";
  EXPECT_EQ(other.reference->replica.started, cursor_instant(now - 3s)) << "kept to the microsecond";
  EXPECT_EQ(other.differences, (std::vector<SettingDifference>{{"claim_ttl", "1m", "30s"}}));
  // Oldest start first; a refused record is kept, so an operator sees it.
  EXPECT_EQ(ids(*a, now), (std::vector<std::string>{"c-", "b+", "a+"}));
  const RegistryRead read = c->read_replicas(now);
  ASSERT_EQ(read.replicas.size(), 3u);
  EXPECT_EQ(read.replicas[1].beat, cursor_instant(now));
  EXPECT_EQ(read.replicas[1].expires_at, cursor_instant(now + ttl));
  EXPECT_EQ(read.replicas[1].replica.settings, replica("b", "30s", now - 3s).settings);
  // A replica announcing again with its start to the nanosecond finds its own record: nothing expired.
  EXPECT_TRUE(b->announce_replica(replica("b", "30s", now - 3s), now + 1s, ttl).expired.empty());
  // Refused again at its next announcement: refusal does not wear off.
  EXPECT_EQ(status_of(c->announce_replica(replica("c", "1m", now - 4s), now + 5s, ttl)),
            ReplicaAnnounce::Status::refused);
}

TEST_P(FleetStateContract, ARefusedReplicaIsAcceptedOnceNoneWithTheFleetsSettingsIsLeft) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), c = fleet->replica();
  const Instant now = real_now();
  EXPECT_EQ(status_of(a->announce_replica(replica("a", "30s", now), now, ttl)), ReplicaAnnounce::Status::accepted);
  EXPECT_EQ(status_of(c->announce_replica(replica("c", "1m", now), now, ttl)), ReplicaAnnounce::Status::refused);
  // A clean stop: gone at once.
  EXPECT_EQ(a->withdraw_replica("a", now).status, ControlChange::Status::changed);
  EXPECT_EQ(a->withdraw_replica("a", now).status, ControlChange::Status::unchanged);
  EXPECT_EQ(status_of(c->announce_replica(replica("c", "1m", now), now + 1s, ttl)), ReplicaAnnounce::Status::accepted);
  // Now a replica with the old settings is the one refused.
  EXPECT_EQ(status_of(a->announce_replica(replica("a", "30s", now), now + 2s, ttl)), ReplicaAnnounce::Status::refused);
  // A crash: the record goes when it expires (at the reader's clock).
  EXPECT_EQ(ids(*a, now + 1s + ttl - 1ms), (std::vector<std::string>{"a-", "c+"}));
  EXPECT_EQ(ids(*a, now + 1s + ttl), (std::vector<std::string>{"a-"}));
  EXPECT_EQ(status_of(a->announce_replica(replica("a", "30s", now), now + 1s + ttl, ttl)),
            ReplicaAnnounce::Status::accepted);
}

TEST_P(FleetStateContract, AReplicaWhoseClockIsFarAheadCannotTakeTheFleetsSettings) {
  // Its clock says the others' records expired: it drops them and is
  // accepted alone, but its own record, beating from the future, is not
  // the fleet's reference for the others (its claims meet the skew guard).
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica(), c = fleet->replica();
  const Instant now = real_now();
  EXPECT_EQ(status_of(a->announce_replica(replica("a", "30s", now), now, ttl)), ReplicaAnnounce::Status::accepted);
  const Instant ahead = now + ttl + 1s;
  EXPECT_EQ(status_of(b->announce_replica(replica("b", "1m", ahead), ahead, ttl)), ReplicaAnnounce::Status::accepted);
  EXPECT_EQ(ids(*a, now + 5s), std::vector<std::string>{"b+"}) << "a's record was dropped";
  EXPECT_EQ(status_of(a->announce_replica(replica("a", "30s", now), now + 5s, ttl)), ReplicaAnnounce::Status::accepted);
  const ReplicaAnnounce joined = c->announce_replica(replica("c", "30s", now + 6s), now + 6s, ttl);
  EXPECT_EQ(status_of(joined), ReplicaAnnounce::Status::accepted);
  ASSERT_TRUE(joined.reference);
  EXPECT_EQ(joined.reference->replica.replica_id, "a");
  // Within a heartbeat ahead, a record counts: refused against it.
  auto d = fleet->replica();
  const ReplicaAnnounce behind = d->announce_replica(replica("d", "2m", now + 1s), now + 1s, ttl);
  EXPECT_EQ(status_of(behind), ReplicaAnnounce::Status::refused);
  ASSERT_TRUE(behind.reference);
  EXPECT_EQ(behind.reference->replica.replica_id, "a");
}

TEST_P(FleetStateContract, OtherJobsAreReportedNotRefused) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const Instant now = real_now();
  EXPECT_TRUE(a->announce_replica(replica("a", "30s", now), now, ttl).other_jobs.empty());
  ReplicaAnnouncement deploying = replica("b", "30s", now);
  deploying.jobs_digest = "jobs-2";
  const ReplicaAnnounce answer = b->announce_replica(deploying, now, ttl);
  EXPECT_EQ(status_of(answer), ReplicaAnnounce::Status::accepted);
  EXPECT_EQ(answer.other_jobs, std::vector<std::string>{"a on host-a"});
}

TEST_P(FleetStateContract, RacingFirstAnnouncementsAgreeOnOneSetOfSettings) {
  auto fleet = GetParam().make();
  constexpr std::size_t replicas = 6;
  std::vector<std::shared_ptr<FleetState>> states;
  for (std::size_t i = 0; i < replicas; ++i) states.push_back(fleet->replica());
  const Instant now = real_now();
  std::vector<ReplicaAnnounce> answers(replicas);
  std::barrier start(static_cast<std::ptrdiff_t>(replicas));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < replicas; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      answers[i] = states[i]->announce_replica(replica("r" + std::to_string(i), i % 2 ? "1m" : "30s", now), now, ttl);
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<std::string> accepted_ttls;
  for (std::size_t i = 0; i < replicas; ++i) {
    ASSERT_NE(answers[i].status, ReplicaAnnounce::Status::error) << answers[i].error;
    if (answers[i].status == ReplicaAnnounce::Status::accepted) accepted_ttls.push_back(i % 2 ? "1m" : "30s");
  }
  ASSERT_EQ(accepted_ttls.size(), 3u) << "one side's three, the other's none";
  EXPECT_TRUE(std::all_of(accepted_ttls.begin(), accepted_ttls.end(), [&](const auto& t) { return t == accepted_ttls[0]; }));
  EXPECT_EQ(ids(*states[0], now).size(), replicas);
}

TEST_P(FleetStateContract, ARegistryThatIsNotOneIsReplacedByTheNextAnnouncement) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const auto written = a->replace_document(FleetState::Document::registry, {}, "not a registry", 0ns);
  ASSERT_EQ(written.status, FleetState::DocumentReplace::Status::written) << written.error;
  const Instant now = real_now();
  const RegistryRead unreadable = a->read_replicas(now);
  EXPECT_EQ(unreadable.status, RegistryRead::Status::error);
  EXPECT_NE(unreadable.error.find("the replica registry holds \"not a registry\""), std::string::npos) << unreadable.error;
  EXPECT_EQ(a->withdraw_replica("a", now).status, ControlChange::Status::error) << "only an announcement replaces it";
  const ReplicaAnnounce answer = a->announce_replica(replica("a", "30s", now), now, ttl);
  EXPECT_EQ(status_of(answer), ReplicaAnnounce::Status::accepted);
  EXPECT_NE(answer.replaced.find("\"not a registry\""), std::string::npos) << answer.replaced;
  EXPECT_EQ(ids(*a, now), std::vector<std::string>{"a+"});
  EXPECT_TRUE(a->announce_replica(replica("a", "30s", now), now, ttl).replaced.empty());
  EXPECT_THROW((void)a->announce_replica(replica("two words", "30s", now), now, ttl), std::invalid_argument);
  EXPECT_THROW((void)a->announce_replica(replica("a", "30s", now), now, 1ms), std::invalid_argument);
}

TEST_P(FleetStateContract, AnExpiredRecordIsHandedToTheOneAnnouncementThatDropsIt) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica(), c = fleet->replica();
  const Instant now = real_now();
  ReplicaAnnouncement busy = replica("a", "30s", now);
  busy.runs = {{"job", "job@2026-01-01T00:00:00Z", at("2026-01-01T00:00:00Z"), 7, cursor_instant(now), 0, false}};
  ASSERT_EQ(status_of(a->announce_replica(busy, now, ttl)), ReplicaAnnounce::Status::accepted);
  ASSERT_EQ(status_of(b->announce_replica(replica("b", "30s", now), now + ttl - 1s, ttl)),
            ReplicaAnnounce::Status::accepted);
  // b stops cleanly after a expired: a's record stays for someone to report.
  EXPECT_EQ(b->withdraw_replica("b", now + ttl + 1s).status, ControlChange::Status::changed);
  const ReplicaAnnounce first = c->announce_replica(replica("c", "30s", now + ttl + 2s), now + ttl + 2s, ttl);
  ASSERT_EQ(first.expired.size(), 1u);
  EXPECT_EQ(first.expired.front().replica.runs, busy.runs);
  EXPECT_TRUE(c->announce_replica(replica("c", "30s", now + ttl + 2s), now + ttl + 3s, ttl).expired.empty())
      << "handed over once";
  // Its own record expired (a stall): not its own loss to report.
  const Instant late = now + 3 * ttl;
  EXPECT_TRUE(c->announce_replica(replica("c", "30s", now + ttl + 2s), late, ttl).expired.empty());
  // The same id with another start: an earlier process's record, dead.
  const ReplicaAnnounce restarted = c->announce_replica(replica("c", "30s", late), late + 1s, ttl);
  ASSERT_EQ(restarted.expired.size(), 1u);
  EXPECT_EQ(restarted.expired.front().replica.started, cursor_instant(now + ttl + 2s));
  EXPECT_EQ(ids(*c, late + 1s), std::vector<std::string>{"c+"});
}

TEST_P(FleetStateContract, TheCatalogueKeepsEachJobAsLastMentionedUntilNoReplicaDoes) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const Instant now = cursor_instant(real_now());
  const std::vector<CataloguedJob> from_a{{"nightly report", "0 3 * * *", "Europe/Paris", false, now, "a"},
                                          {"tick", "* * * * * *", "UTC", true, now, "a"}};
  ASSERT_EQ(a->catalogue_jobs(from_a, now).status, ControlChange::Status::changed);
  const std::vector<CataloguedJob> from_b{{"tick", "*/2 * * * * *", "UTC", true, now + 1h, "b"}};
  ASSERT_EQ(b->catalogue_jobs(from_b, now + 1h).status, ControlChange::Status::changed);
  const CatalogueRead read = a->read_catalogue(now + 1h);
  ASSERT_EQ(read.status, CatalogueRead::Status::found) << read.error;
  EXPECT_EQ(read.jobs, (std::vector<CataloguedJob>{from_a[0], from_b[0]})) << "by key; the last mention wins";
  // Mentioned by nobody for catalogue_keep_for: gone.
  const CatalogueRead later = a->read_catalogue(now + catalogue_keep_for);
  EXPECT_EQ(later.jobs, std::vector<CataloguedJob>{from_b[0]});
  // Garbage under a part's key: that part's jobs are left out and named,
  // the others read; the next mention rebuilds it.
  const FleetState::DocumentId garbage_part{FleetState::Document::catalogue, catalogue_part("tick")};
  ASSERT_EQ(a->replace_document(garbage_part, a->load_document(garbage_part), "garbage", 0ns).status,
            FleetState::DocumentReplace::Status::written);
  ASSERT_NE(catalogue_part("tick"), catalogue_part("nightly report"));
  const CatalogueRead partial = a->read_catalogue(now);
  EXPECT_EQ(partial.status, CatalogueRead::Status::found);
  EXPECT_EQ(partial.jobs, std::vector<CataloguedJob>{from_a[0]});
  EXPECT_EQ(partial.error, fmt::format("the job catalogue's key {} holds \"garbage\", not a catalogue (its jobs are left "
                                       "out until a replica writes it again)",
                                       document_name(garbage_part)));
  ASSERT_EQ(a->catalogue_jobs(from_a, now).status, ControlChange::Status::changed);
  EXPECT_EQ(a->read_catalogue(now).jobs, from_a);
  EXPECT_EQ(a->read_catalogue(now).error, "");
}

// A replica's complete list: what it mentioned last and lists no more (a
// reload dropped it) is marked removed, not what another replica mentioned
// last; a mention of the job by any replica unmarks it.
TEST_P(FleetStateContract, TheCatalogueMarksAJobItsReplicaDroppedAsRemoved) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const Instant now = cursor_instant(real_now());
  const std::vector<CataloguedJob> from_a{{"backup", "0 3 * * *", "UTC", false, now, "a"},
                                          {"report", "0 9 * * *", "UTC", false, now, "a"}};
  ASSERT_EQ(a->catalogue_jobs(from_a, now, "a").status, ControlChange::Status::changed);
  const std::vector<CataloguedJob> from_b{{"tick", "* * * * *", "UTC", false, now, "b"}};
  ASSERT_EQ(b->catalogue_jobs(from_b, now, "b").status, ControlChange::Status::changed);
  // a's reload dropped "report".
  ASSERT_EQ(a->catalogue_jobs(std::span(from_a).first(1), now + 1min, "a").status, ControlChange::Status::changed);
  CatalogueRead read = a->read_catalogue(now + 1min);
  ASSERT_EQ(read.status, CatalogueRead::Status::found) << read.error;
  ASSERT_EQ(read.jobs.size(), 3u);
  EXPECT_EQ(read.jobs[0], from_a[0]);
  EXPECT_EQ(read.jobs[1].job_key, "report");
  EXPECT_EQ(read.jobs[1].removed, now + 1min);
  EXPECT_EQ(read.jobs[1].seen, now) << "removed, still as last seen";
  EXPECT_EQ(read.jobs[2], from_b[0]) << "b's job is not a's to remove";
  // b still runs "report": its mention unmarks it.
  const std::vector<CataloguedJob> report_on_b{{"report", "0 9 * * *", "UTC", false, now + 2min, "b"}, from_b[0]};
  ASSERT_EQ(b->catalogue_jobs(report_on_b, now + 2min, "b").status, ControlChange::Status::changed);
  read = a->read_catalogue(now + 2min);
  ASSERT_EQ(read.jobs.size(), 3u);
  EXPECT_EQ(read.jobs[1], report_on_b[0]);
  // Without a replica id a list is not complete: nothing is marked.
  ASSERT_EQ(b->catalogue_jobs(std::span(report_on_b).last(1), now + 3min).status, ControlChange::Status::changed);
  read = a->read_catalogue(now + 3min);
  EXPECT_FALSE(read.jobs[1].removed.has_value());
}

// 100,000 jobs with realistic names: the catalogue spreads them over its
// parts, none past the bound each store takes (NATS: 1 MiB a value), and
// reads them all back; one more job is refused, naming the limit, and
// nothing is written.
TEST_P(FleetStateContract, TheCatalogueHoldsAHundredThousandJobsInPartsAStoreTakes) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const Instant now = cursor_instant(real_now());
  std::vector<CataloguedJob> jobs;
  for (std::size_t i = 0; i < max_catalogued_jobs; ++i) {
    jobs.push_back({fmt::format("customer-{:06} nightly export", i), fmt::format("{} {} * * *", i % 60, i % 24),
                    "Europe/Paris", false, now, "web-1-4242-3fa9c1"});
  }
  ASSERT_EQ(a->catalogue_jobs(jobs, now, "web-1-4242-3fa9c1").status, ControlChange::Status::changed);
  std::size_t parts_used = 0;
  for (std::uint32_t part = 0; part < FleetState::catalogue_parts; ++part) {
    const auto stored = a->load_document({FleetState::Document::catalogue, part});
    ASSERT_NE(stored.status, FleetState::StoredDocument::Status::error) << stored.error;
    EXPECT_LE(stored.text.size(), max_catalogue_bytes) << document_name({FleetState::Document::catalogue, part});
    parts_used += static_cast<std::size_t>(!stored.text.empty());
  }
  EXPECT_EQ(parts_used, FleetState::catalogue_parts);
  const CatalogueRead read = a->read_catalogue(now);
  ASSERT_EQ(read.status, CatalogueRead::Status::found) << read.error;
  ASSERT_EQ(read.jobs.size(), jobs.size());
  EXPECT_EQ(read.jobs.front(), jobs.front());
  EXPECT_EQ(read.jobs.back(), jobs.back());
  // Another replica's one more job: past the limit, refused whole.
  auto b = fleet->replica();
  const std::vector<CataloguedJob> one_more{{"one more", "* * * * *", "UTC", false, now + 1s, "b"}};
  const ControlChange refused = b->catalogue_jobs(one_more, now + 1s, "b");
  ASSERT_EQ(refused.status, ControlChange::Status::error);
  EXPECT_EQ(refused.error, "the job catalogue would hold 100001 jobs, more than the limit of 100000");
  EXPECT_EQ(a->read_catalogue(now + 1s).jobs.size(), jobs.size());
  // A reload at the limit renames a job: the old one is marked removed,
  // and removed lines do not count (they go within 48 h).
  jobs.back().job_key = "customer-renamed nightly export";
  for (auto& job : jobs) job.seen = now + 2s;
  ASSERT_EQ(a->catalogue_jobs(jobs, now + 2s, "web-1-4242-3fa9c1").status, ControlChange::Status::changed);
  const CatalogueRead renamed = a->read_catalogue(now + 2s);
  ASSERT_EQ(renamed.jobs.size(), jobs.size() + 1);
  EXPECT_EQ(std::count_if(renamed.jobs.begin(), renamed.jobs.end(), [](const CataloguedJob& j) { return j.removed; }), 1);
}

// A release before 0.3 keeps the whole catalogue in the key "jobs", the
// part 0: a job both it and a newer replica mention is read as the newer
// mention says, wherever it is.
TEST_P(FleetStateContract, AJobInTwoPartsIsReadAsItsNewerMention) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const Instant now = cursor_instant(real_now());
  std::string key = "report";
  while (catalogue_part(key) == 0) key += "+";
  const std::vector<CataloguedJob> newer{{key, "0 9 * * *", "UTC", false, now + 1min, "new"}};
  ASSERT_EQ(a->catalogue_jobs(newer, now + 1min, "new").status, ControlChange::Status::changed);
  const CataloguedJob older{key, "0 8 * * *", "UTC", false, now, "old"};
  const FleetState::DocumentId zero{FleetState::Document::catalogue, 0};
  ASSERT_EQ(a->replace_document(zero, a->load_document(zero), format_job_catalogue(std::span(&older, 1)), 0ns).status,
            FleetState::DocumentReplace::Status::written);
  EXPECT_EQ(a->read_catalogue(now + 1min).jobs, newer);
  const CataloguedJob newest{key, "0 7 * * *", "UTC", false, now + 2min, "old"};
  ASSERT_EQ(a->replace_document(zero, a->load_document(zero), format_job_catalogue(std::span(&newest, 1)), 0ns).status,
            FleetState::DocumentReplace::Status::written);
  EXPECT_EQ(a->read_catalogue(now + 2min).jobs, std::vector<CataloguedJob>{newest});
  // The newer replica's next write takes the job's line out of part 0, so
  // an older release's lines do not fill it.
  const std::vector<CataloguedJob> again{{key, "0 9 * * *", "UTC", false, now + 3min, "new"}};
  ASSERT_EQ(a->catalogue_jobs(again, now + 3min, "new").status, ControlChange::Status::changed);
  EXPECT_EQ(a->load_document(zero).text.find(key), std::string::npos) << a->load_document(zero).text;
  EXPECT_EQ(a->read_catalogue(now + 3min).jobs, again);
}

}  // namespace fleetcron::test
