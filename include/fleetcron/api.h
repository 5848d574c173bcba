// fleetcron — FLEETCRON_API marks what the shared libraries export. They
// are built with hidden visibility (-fvisibility=hidden, inlines hidden):
// only the public API below include/fleetcron/ is in their dynamic symbol
// tables, so internals can change without breaking a consumer's link, and
// the dynamic linker has fewer symbols to resolve. The static archives are
// compiled the same way; a program that links them is unaffected.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FLEETCRON_API __attribute__((visibility("default")))
#else
#define FLEETCRON_API
#endif

// FLEETCRON_LOCAL hides a class nested in an exported one (its pimpl),
// which would otherwise take the enclosing class's default visibility.
// For the libraries' own definitions in src/.
#if defined(__GNUC__) || defined(__clang__)
#define FLEETCRON_LOCAL __attribute__((visibility("hidden")))
#else
#define FLEETCRON_LOCAL
#endif
