// Internal: FLEETCRON_ASSERT, the check of an invariant the code relies on.
// Unlike assert() it is never compiled out: every build the project ships
// or tests is Release or RelWithDebInfo (NDEBUG), where assert() does
// nothing, and a broken invariant is better stopped at once, with where
// it broke, than run on into lost or repeated fires. Use it for what must
// never happen whatever the input (bad input gets an error, not this),
// and keep each check cheap: it runs in production.
#pragma once

namespace fleetcron::detail {

/// What a failed assertion calls instead of aborting; see
/// set_assertion_handler().
using AssertionHandler = void (*)(const char* condition, const char* file, int line) noexcept;

/// The test hook: from now on a failed FLEETCRON_ASSERT calls `handler`
/// instead of aborting, and the code runs on past the broken invariant
/// when it returns (nullptr restores the abort). Returns the previous
/// handler. For tests only (tests/support/assertion_hook.cpp turns each
/// failure into a failure of the test that was running); no production
/// code sets it. Safe to call from any thread.
AssertionHandler set_assertion_handler(AssertionHandler handler) noexcept;

/// Without a handler: writes "fleetcron: assertion failed: CONDITION
/// (FILE:LINE)" to stderr and aborts. With one: calls it and returns.
void assertion_failed(const char* condition, const char* file, int line) noexcept;

}  // namespace fleetcron::detail

#define FLEETCRON_ASSERT(condition) \
  ((condition) ? static_cast<void>(0) : ::fleetcron::detail::assertion_failed(#condition, __FILE__, __LINE__))
