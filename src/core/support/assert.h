// Internal: FLEETCRON_ASSERT, the check of an invariant the code relies on.
// Unlike assert() it is never compiled out: every build the project ships
// or tests is Release or RelWithDebInfo (NDEBUG), where assert() does
// nothing, and a broken invariant is better stopped at once, with where
// it broke, than run on into lost or repeated fires. Use it for what must
// never happen whatever the input (bad input gets an error, not this),
// and keep each check cheap: it runs in production.
#pragma once

namespace fleetcron::detail {
/// Writes "fleetcron: assertion failed: CONDITION (FILE:LINE)" to stderr
/// and aborts.
[[noreturn]] void assertion_failed(const char* condition, const char* file, int line) noexcept;
}  // namespace fleetcron::detail

#define FLEETCRON_ASSERT(condition) \
  ((condition) ? static_cast<void>(0) : ::fleetcron::detail::assertion_failed(#condition, __FILE__, __LINE__))
