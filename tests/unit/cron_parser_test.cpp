// The grammar: what parses, and what each class of bad input reports.
#include <gtest/gtest.h>

#include "core/schedule/cron_schedule.h"
#include "test_util.h"

namespace fleetcron {
namespace {

using test::with_seconds;

// A copy: the schedule is usually a temporary.
detail::CronFields fields_of(const SchedulePtr& schedule) {
  auto cron = std::dynamic_pointer_cast<const detail::CronSchedule>(schedule);
  EXPECT_NE(cron, nullptr);
  return cron->fields();
}

std::uint64_t bits(std::initializer_list<unsigned> values) {
  std::uint64_t mask = 0;
  for (unsigned v : values) mask |= std::uint64_t{1} << v;
  return mask;
}

TEST(CronParser, StarCoversTheWholeRange) {
  const auto f = fields_of(parse_schedule("* * * * *"));
  EXPECT_EQ(f.seconds, bits({0}));
  EXPECT_EQ(f.minutes, (std::uint64_t{1} << 60) - 1);
  EXPECT_EQ(f.hours, (1u << 24) - 1);
  EXPECT_EQ(f.days_of_month, 0xFFFF'FFFEu);
  EXPECT_EQ(f.months, 0x1FFE);
  EXPECT_EQ(f.days_of_week, 0x7F);
  EXPECT_TRUE(f.day_of_month_star);
  EXPECT_TRUE(f.day_of_week_star);
}

TEST(CronParser, ValuesRangesStepsAndLists) {
  const auto f = fields_of(parse_schedule("5,10-12,50/3 */6 1-10/4 3/4 1-5"));
  EXPECT_EQ(f.minutes, bits({5, 10, 11, 12, 50, 53, 56, 59}));
  EXPECT_EQ(f.hours, bits({0, 6, 12, 18}));
  EXPECT_EQ(f.days_of_month, bits({1, 5, 9}));
  EXPECT_EQ(f.months, bits({3, 7, 11}));
  EXPECT_EQ(f.days_of_week, bits({1, 2, 3, 4, 5}));
  EXPECT_FALSE(f.day_of_month_star);
  EXPECT_FALSE(f.day_of_week_star);
}

TEST(CronParser, NamesAreCaseInsensitiveAndWorkInRanges) {
  const auto f = fields_of(parse_schedule("0 0 * JAN-mar,Dec mon-FRI"));
  EXPECT_EQ(f.months, bits({1, 2, 3, 12}));
  EXPECT_EQ(f.days_of_week, bits({1, 2, 3, 4, 5}));
  EXPECT_EQ(fields_of(parse_schedule("0 0 * * sun,sat")).days_of_week, bits({0, 6}));
}

TEST(CronParser, SevenIsSunday) {
  EXPECT_EQ(fields_of(parse_schedule("0 0 * * 7")).days_of_week, bits({0}));
  EXPECT_EQ(fields_of(parse_schedule("0 0 * * 5-7")).days_of_week, bits({0, 5, 6}));
  EXPECT_EQ(fields_of(parse_schedule("0 0 * * 0-7")).days_of_week, 0x7F);
  // Vixie cron and cronie: a day-of-week step runs to 6, not 7 (Sunday).
  EXPECT_EQ(fields_of(parse_schedule("0 0 * * 1/2")).days_of_week, bits({1, 3, 5}));
  EXPECT_EQ(fields_of(parse_schedule("0 0 * * */2")).days_of_week, bits({0, 2, 4, 6}));
  EXPECT_EQ(fields_of(parse_schedule("0 0 * * 1-7/2")).days_of_week, bits({0, 1, 3, 5}));  // 7 as a range end
  // A step as large as the range fires at the start only.
  EXPECT_EQ(fields_of(parse_schedule("*/60 * * * *")).minutes, bits({0}));
  EXPECT_EQ(fields_of(parse_schedule("0 */24 * * *")).hours, bits({0}));
  EXPECT_EQ(fields_of(parse_schedule("0 5/30 * * *")).hours, bits({5}));
}

TEST(CronParser, QuestionMarkIsStarInDayFields) {
  const auto f = fields_of(parse_schedule("0 0 ? * 1"));
  EXPECT_TRUE(f.day_of_month_star);
  EXPECT_EQ(f.days_of_month, 0xFFFF'FFFEu);
  EXPECT_TRUE(fields_of(parse_schedule("0 0 1 * ?")).day_of_week_star);
}

TEST(CronParser, StarWithStepCountsAsStarForTheDayRule) {
  const auto f = fields_of(parse_schedule("0 0 */2 * 1"));
  EXPECT_TRUE(f.day_of_month_star);
  EXPECT_EQ(f.days_of_month & bits({1, 2, 3}), bits({1, 3}));
}

TEST(CronParser, SecondsOption) {
  EXPECT_EQ(fields_of(parse_schedule("*/20 * * * * *", with_seconds(SecondsField::optional))).seconds,
            bits({0, 20, 40}));
  EXPECT_EQ(fields_of(parse_schedule("* * * * *", with_seconds(SecondsField::optional))).seconds, bits({0}));
  EXPECT_EQ(fields_of(parse_schedule("15 * * * * *", with_seconds(SecondsField::required))).seconds, bits({15}));
}

TEST(CronParser, AYearFieldComesLast) {
  // Without seconds a 6th field is a year when it names one; with seconds a 7th.
  const auto plain = fields_of(parse_schedule("0 0 1 1 * 2027"));
  EXPECT_FALSE(plain.any_year);
  EXPECT_TRUE(plain.year_matches(2027));
  EXPECT_FALSE(plain.year_matches(2026));
  EXPECT_FALSE(plain.year_matches(2028));
  const auto list = fields_of(parse_schedule("0 0 1 1 * 2027,2030-2034/2"));
  for (int y : {2027, 2030, 2032, 2034}) EXPECT_TRUE(list.year_matches(y)) << y;
  for (int y : {2028, 2029, 2031, 2033, 2035}) EXPECT_FALSE(list.year_matches(y)) << y;
  const auto star = fields_of(parse_schedule("*/5 * * * * * *", with_seconds(SecondsField::required)));
  EXPECT_TRUE(star.any_year);
  EXPECT_EQ(star.seconds, bits({0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55}));
  const auto seven = fields_of(parse_schedule("30 0 0 1 1 * 2027-2029", with_seconds(SecondsField::optional)));
  EXPECT_EQ(seven.seconds, bits({30}));
  EXPECT_TRUE(seven.year_matches(2029));
  EXPECT_FALSE(seven.year_matches(2030));
  // Under optional seconds 6 fields stay seconds first.
  EXPECT_EQ(fields_of(parse_schedule("0 0 1 1 * 2", with_seconds(SecondsField::optional))).days_of_week, 1u << 2);
}

TEST(CronParser, AYearFieldBoundsTheFires) {
  const auto schedule = parse_schedule("0 9 1 * * 2027");
  auto fire = schedule->next(test::at("2026-12-06T11:00:00Z"));
  ASSERT_TRUE(fire);
  EXPECT_EQ(*fire, test::at("2027-01-01T09:00:00Z"));
  fire = schedule->next(test::at("2027-12-01T09:00:00Z"));
  EXPECT_FALSE(fire.has_value());  // nothing after the last month of the last year
  // Further than the 50-year horizon, when the year field says so.
  fire = parse_schedule("0 0 29 2 * 2096")->next(test::at("2026-12-06T11:00:00Z"));
  ASSERT_TRUE(fire);
  EXPECT_EQ(*fire, test::at("2096-02-29T00:00:00Z"));
  EXPECT_FALSE(parse_schedule("0 0 1 1 * 2020")->next(test::at("2026-12-06T11:00:00Z")).has_value());
  // In a zone with daylight saving time.
  fire = parse_schedule("TZ=America/New_York 30 2 * 3 0 2027")->next(test::at("2026-12-06T11:00:00Z"));
  ASSERT_TRUE(fire);
  EXPECT_EQ(*fire, test::at("2027-03-07T07:30:00Z"));
}

TEST(CronParser, QuartzDayTokens) {
  const auto dom = fields_of(parse_schedule("0 0 L,L-3,LW,15W * ?"));
  EXPECT_TRUE(dom.last_day);
  EXPECT_EQ(dom.days_before_last, bits({3}));
  EXPECT_TRUE(dom.last_weekday);
  EXPECT_EQ(dom.nearest_weekday, bits({15}));
  EXPECT_EQ(dom.days_of_month, 0u);
  const auto dow = fields_of(parse_schedule("0 0 ? * FRI#3,1#1,5L,satL"));
  EXPECT_EQ(dow.nth_of_weekday[5], bits({3}));
  EXPECT_EQ(dow.nth_of_weekday[1], bits({1}));
  EXPECT_EQ(dow.last_of_weekday, bits({5, 6}));
  EXPECT_EQ(fields_of(parse_schedule("0 0 ? * 7L")).last_of_weekday, bits({0}));
}

TEST(CronParser, Descriptors) {
  struct Case {
    const char* spec;
    const char* equivalent;
  };
  for (const Case& c : {Case{"@yearly", "0 0 1 1 *"}, Case{"@annually", "0 0 1 1 *"}, Case{"@monthly", "0 0 1 * *"},
                        Case{"@weekly", "0 0 * * 0"}, Case{"@daily", "0 0 * * *"}, Case{"@midnight", "0 0 * * *"},
                        Case{"@hourly", "0 * * * *"}}) {
    SCOPED_TRACE(c.spec);
    const auto a = fields_of(parse_schedule(c.spec));
    const auto b = fields_of(parse_schedule(c.equivalent));
    EXPECT_EQ(a.seconds, b.seconds);
    EXPECT_EQ(a.minutes, b.minutes);
    EXPECT_EQ(a.hours, b.hours);
    EXPECT_EQ(a.days_of_month, b.days_of_month);
    EXPECT_EQ(a.months, b.months);
    EXPECT_EQ(a.days_of_week, b.days_of_week);
    EXPECT_EQ(a.day_of_month_star, b.day_of_month_star);
    EXPECT_EQ(a.day_of_week_star, b.day_of_week_star);
  }
}

TEST(CronParser, EveryIsAFixedInterval) {
  const auto schedule = parse_schedule("@every 1h30m");
  EXPECT_EQ(schedule->spec(), "@every 1h30m");
  EXPECT_EQ(schedule->next(test::at("2026-01-01T00:00:00Z")), test::at("2026-01-01T01:30:00Z"));
  EXPECT_EQ(parse_schedule("@every 500ms")->next(test::at("2026-01-01T00:00:00Z")),
            test::at("2026-01-01T00:00:00.5Z"));
  EXPECT_EQ(parse_schedule("@every 1ms")->next(test::at("2026-01-01T00:00:00Z")),
            test::at("2026-01-01T00:00:00.001Z"));
}

TEST(CronParser, ZonePrefixes) {
  EXPECT_EQ(parse_schedule("TZ=America/New_York 0 9 * * *")->zone().name(), "America/New_York");
  EXPECT_EQ(parse_schedule("CRON_TZ=Europe/Berlin @daily")->zone().name(), "Europe/Berlin");
  EXPECT_TRUE(parse_schedule("TZ=UTC 0 9 * * *")->zone().is_utc());
  // The prefix wins over the default zone.
  EXPECT_EQ(parse_schedule("TZ=Asia/Kolkata 0 9 * * *", test::in_zone("Europe/Berlin"))->zone().name(),
            "Asia/Kolkata");
  EXPECT_EQ(parse_schedule("0 9 * * *", test::in_zone("Europe/Berlin"))->zone().name(), "Europe/Berlin");
}

TEST(CronParser, SpecTextIsKeptAndWhitespaceIsFlexible) {
  const auto schedule = parse_schedule("  0\t9  * *   1 ");
  EXPECT_EQ(schedule->spec(), "  0\t9  * *   1 ");
  EXPECT_EQ(fields_of(schedule).days_of_week, bits({1}));
}

TEST(CronParser, MessageFormat) {
  try {
    (void)parse_schedule("61 * * * *");
    FAIL() << "expected ParseError";
  } catch (const ParseError& e) {
    EXPECT_STREQ(e.what(), "parse \"61 * * * *\": field minute at offset 0: 61 above maximum 59");
    EXPECT_EQ(e.spec(), "61 * * * *");
    EXPECT_EQ(e.field(), "minute");
    EXPECT_EQ(e.position(), 0u);
    EXPECT_EQ(e.reason(), "61 above maximum 59");
  }
}

struct BadSpec {
  const char* spec;
  SecondsField seconds;
  const char* field;
  std::size_t position;
  const char* reason;
};

class CronParserRejects : public ::testing::TestWithParam<BadSpec> {};

TEST_P(CronParserRejects, WithFieldPositionAndReason) {
  const BadSpec& bad = GetParam();
  try {
    (void)parse_schedule(bad.spec, with_seconds(bad.seconds));
    FAIL() << "accepted: " << bad.spec;
  } catch (const ParseError& e) {
    EXPECT_EQ(e.field(), bad.field) << e.what();
    EXPECT_EQ(e.position(), bad.position) << e.what();
    EXPECT_EQ(e.reason(), bad.reason) << e.what();
  }
}

constexpr auto none = SecondsField::none;
constexpr auto optional = SecondsField::optional;
constexpr auto required = SecondsField::required;

INSTANTIATE_TEST_SUITE_P(
    Grammar, CronParserRejects,
    ::testing::Values(
        // out of range
        BadSpec{"61 * * * *", none, "minute", 0, "61 above maximum 59"},
        BadSpec{"0 24 * * *", none, "hour", 2, "24 above maximum 23"},
        BadSpec{"0 0 0 * *", none, "day-of-month", 4, "0 below minimum 1"},
        BadSpec{"0 0 32 * *", none, "day-of-month", 4, "32 above maximum 31"},
        BadSpec{"0 0 * 13 *", none, "month", 6, "13 above maximum 12"},
        BadSpec{"0 0 * 0 *", none, "month", 6, "0 below minimum 1"},
        BadSpec{"0 0 * * 8", none, "day-of-week", 8, "8 above maximum 7"},
        BadSpec{"60 * * * * *", optional, "second", 0, "60 above maximum 59"},
        BadSpec{"0 1-70 * * *", none, "hour", 4, "70 above maximum 23"},
        // reversed ranges
        BadSpec{"0 5-3 * * *", none, "hour", 2, "beginning of range 5 beyond end 3: a range does not wrap around; write 5-23,0-3"},
        BadSpec{"0 0 * * fri-mon", none, "day-of-week", 8, "beginning of range 5 beyond end 1: a range does not wrap around; write 5-6,0-1"},
        // steps
        BadSpec{"*/0 * * * *", none, "minute", 2, "step 0: a step must be at least 1"},
        BadSpec{"0 0 * * 7/1", none, "day-of-week", 8, "7 (Sunday) cannot start a step: write 0/step"},
        BadSpec{"0 0 ? * ?/2", none, "day-of-week", 9, "'?' takes no step (it means \"no specific value\")"},
        BadSpec{"*/ * * * *", none, "minute", 2, "expected a number"},
        BadSpec{"*/x * * * *", none, "minute", 2,
                "unexpected character 'x': names are only allowed in month and day-of-week"},
        BadSpec{"*/5/2 * * * *", none, "minute", 3, "unexpected character '/'"},
        // field count
        BadSpec{"* * * *", none, "", 7, "expected 5 fields, or 6 with a year last, got 4"},
        BadSpec{"* * * * * *", none, "", 10,
                "expected 5 fields, or 6 with a year last, got 6: the 6th field \"*\" names no year (1970-2099); a "
                "seconds field comes first only with the seconds option"},
        BadSpec{"* * * * * * *", none, "", 12, "expected 5 fields, or 6 with a year last, got 7"},
        BadSpec{"* * * * * * * *", optional, "", 14,
                "expected 5 fields, 6 (seconds first) or 7 (seconds first, a year last), got 8"},
        BadSpec{"* * * * *", required, "", 9, "expected 6 fields (seconds first), or 7 with a year last, got 5"},
        // year
        BadSpec{"0 0 1 1 * 1969", none, "year", 10, "1969 below minimum 1970"},
        BadSpec{"0 0 1 1 * 2100", none, "year", 10, "2100 above maximum 2099"},
        BadSpec{"0 30 9 * * 1-5", none, "", 11,
                "expected 5 fields, or 6 with a year last, got 6: the 6th field \"1-5\" names no year (1970-2099); a "
                "seconds field comes first only with the seconds option"},
        BadSpec{"0 0 1 1 * 2027/0", none, "year", 15, "step 0: a step must be at least 1"},
        BadSpec{"0 0 1 1 * 2030-2027", none, "year", 10,
                "beginning of range 2030 beyond end 2027: a range does not wrap around; write 2030-2099,1970-2027"},
        BadSpec{"0 0 1 1 * 2027", optional, "day-of-week", 10, "2027 above maximum 7"},
        BadSpec{"", none, "", 0, "empty spec"},
        BadSpec{"   ", none, "", 3, "empty spec"},
        // names
        BadSpec{"0 0 * foo *", none, "month", 6, "unknown name \"foo\""},
        BadSpec{"0 0 * * monday", none, "day-of-week", 8, "unknown name \"monday\""},
        BadSpec{"0 0 jan * *", none, "day-of-month", 4,
                "unexpected character 'j': names are only allowed in month and day-of-week"},
        BadSpec{"@fortnightly", none, "descriptor", 0, "unknown descriptor \"@fortnightly\""},
        BadSpec{"@daily 5", none, "descriptor", 7, "unexpected text after the descriptor"},
        // empty fields and terms, stray characters
        BadSpec{"1,,2 * * * *", none, "minute", 2, "empty term in list"},
        BadSpec{"1, * * * *", none, "minute", 2, "empty term in list"},
        BadSpec{",1 * * * *", none, "minute", 0, "empty term in list"},
        BadSpec{"1-2-3 * * * *", none, "minute", 3, "unexpected character '-'"},
        BadSpec{"** * * * *", none, "minute", 1, "unexpected character '*'"},
        BadSpec{"5x * * * *", none, "minute", 1,
                "unexpected character 'x': names are only allowed in month and day-of-week"},
        BadSpec{"0 0 * * 1\n", none, "day-of-week", 9, "unexpected character '\\x0a'"},
        BadSpec{"0 ? * * *", none, "hour", 2, "'?' is only allowed in day-of-month and day-of-week"},
        BadSpec{"- * * * *", none, "minute", 0, "unexpected character '-'"},
        // overflow
        BadSpec{"99999999999999999999 * * * *", none, "minute", 0, "number too large"},
        BadSpec{"*/4294967297 * * * *", none, "minute", 2, "number too large"},
        BadSpec{"0 0 L-99999999999 * *", none, "day-of-month", 6, "number too large"},
        BadSpec{"@every 99999999999999999999h", none, "@every", 7, "number too large"},
        // Quartz tokens where they do not belong
        BadSpec{"0 0 * * 5#6", none, "day-of-week", 10, "#6: the occurrence must be 1 to 5"},
        BadSpec{"0 0 * * 5#0", none, "day-of-week", 10, "#0: the occurrence must be 1 to 5"},
        BadSpec{"0 0 * * #2", none, "day-of-week", 8, "expected a day before '#'"},
        BadSpec{"0 0 5#2 * *", none, "day-of-month", 5, "'#' is only allowed in day-of-week"},
        BadSpec{"0 0 * * 5W", none, "day-of-week", 9, "'W' is only allowed in day-of-month"},
        BadSpec{"0 5W * * *", none, "hour", 3, "'W' is only allowed in day-of-month"},
        BadSpec{"5L * * * *", none, "minute", 1, "'L' is only allowed in day-of-month and day-of-week"},
        BadSpec{"0 0 * 5L *", none, "month", 7, "'L' is only allowed in day-of-month and day-of-week"},
        BadSpec{"0 0 * * L", none, "day-of-week", 8, "L in day-of-week needs a day, e.g. 5L or FRIL"},
        BadSpec{"0 0 L-0 * *", none, "day-of-month", 6, "L-0: the offset must be 1 to 30"},
        BadSpec{"0 0 L-31 * *", none, "day-of-month", 6, "L-31: the offset must be 1 to 30"},
        BadSpec{"0 0 LX * *", none, "day-of-month", 5, "expected L, LW or L-n"},
        BadSpec{"0 0 L/2 * *", none, "day-of-month", 5, "expected L, LW or L-n"},
        BadSpec{"0 0 32W * *", none, "day-of-month", 4, "32 above maximum 31"},
        BadSpec{"0 0 5#2/2 * *", none, "day-of-month", 5, "'#' is only allowed in day-of-week"},
        BadSpec{"0 0 * * 5#2/2", none, "day-of-week", 11, "unexpected character '/'"},
        BadSpec{"0 0 * * FRI#", none, "day-of-week", 12, "expected a number"},
        // zones
        BadSpec{"TZ= 0 0 * * *", none, "TZ", 3, "empty time zone"},
        BadSpec{"TZ=Mars/Olympus 0 0 * * *", none, "TZ", 3, "unknown time zone \"Mars/Olympus\""},
        BadSpec{"CRON_TZ=Nowhere @daily", none, "CRON_TZ", 8, "unknown time zone \"Nowhere\""},
        BadSpec{"TZ=Europe/Berlin", none, "TZ", 16, "missing schedule after the time zone"},
        BadSpec{"TZ=../../etc/passwd * * * * *", none, "TZ", 3, "unknown time zone \"../../etc/passwd\""},
        BadSpec{"TZ=Europe/Berlin @every 5s", none, "TZ", 0, "a time zone has no effect on @every (a fixed interval)"},
        BadSpec{"0 0 5L * *", none, "day-of-month", 5,
                "unexpected character 'L': day-of-month takes L, L-n, LW or nW as whole terms"},
        // @every
        BadSpec{"@every", none, "@every", 6, "missing duration, e.g. @every 90s"},
        BadSpec{"@every 500us", none, "@every", 7, "interval 500us below minimum 1ms"},
        BadSpec{"@every 0", none, "@every", 7, "interval 0s below minimum 1ms"},
        BadSpec{"@every 5x", none, "@every", 8, "unknown unit \"x\" (known: ns, us, ms, s, m, h, d)"},
        BadSpec{"@every -5s", none, "@every", 7, "expected a number, found '-'"},
        BadSpec{"@every 5s 6s", none, "@every", 10, "unexpected text after the duration"}),
    [](const ::testing::TestParamInfo<BadSpec>& param) { return "case" + std::to_string(param.index); });

TEST(CronParser, RejectsOverlongSpecs) {
  const std::string spec(max_spec_bytes + 1, '*');
  EXPECT_THROW((void)parse_schedule(spec), ParseError);
}

TEST(CronParser, MessagesEscapeControlCharacters) {
  try {
    (void)parse_schedule(std::string("0 0 * * \x01", 9));
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()).find('\x01'), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("\\x01"), std::string::npos);
  }
}

TEST(DstPolicyNames, RoundTrip) {
  for (auto gap : {DstGap::shift, DstGap::skip}) EXPECT_EQ(dst_gap_from_string(to_string(gap)), gap);
  for (auto overlap : {DstOverlap::first, DstOverlap::last, DstOverlap::both}) {
    EXPECT_EQ(dst_overlap_from_string(to_string(overlap)), overlap);
  }
  EXPECT_FALSE(dst_gap_from_string("Shift"));
  EXPECT_FALSE(dst_overlap_from_string(""));
}

}  // namespace
}  // namespace fleetcron
