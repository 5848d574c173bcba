// Internal: FNV-1a, 64 bits — the digests and ids the fleet state compares
// across replicas (schedule digests, settings fingerprints, the jobs
// digest, trigger ids of request ids), so every replica computes the same.
#pragma once

#include <cstdint>
#include <string_view>

namespace fleetcron::detail {

inline constexpr std::uint64_t fnv1a_offset_basis = 14695981039346656037ULL;

/// `hash` (the offset basis to start) with `text` mixed in.
[[nodiscard]] constexpr std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = fnv1a_offset_basis) noexcept {
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace fleetcron::detail
