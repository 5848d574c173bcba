// Counts the process's heap allocations, for the benchmarks that report
// allocations per operation. Include it from exactly one file of a
// program: it replaces the global operator new and delete.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

namespace bench {
inline std::atomic<std::size_t> allocations{0};
}  // namespace bench

void* operator new(std::size_t size) {
  bench::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
