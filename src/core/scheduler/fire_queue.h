// Internal: the run queue's storage, a ring buffer of fires. Unlike a
// std::deque it allocates only when it grows (never per fire), so the loop
// that fills it and the workers that drain it do not pass blocks of memory
// between threads on every burst.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "core/scheduler/fire.h"

namespace fleetcron::detail {

class FireQueue {
 public:
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  Fire& front() noexcept { return slots_[head_]; }
  const Fire& front() const noexcept { return slots_[head_]; }

  void push_back(Fire fire) {
    reserve_one();
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(fire);
    ++size_;
  }
  void push_front(Fire fire) {
    reserve_one();
    head_ = (head_ + slots_.size() - 1) & (slots_.size() - 1);
    slots_[head_] = std::move(fire);
    ++size_;
  }
  /// Puts `fires` before the queue's front, in their order.
  void push_front(std::vector<Fire>& fires) {
    for (auto it = fires.rbegin(); it != fires.rend(); ++it) push_front(std::move(*it));
  }
  Fire pop_front() {
    Fire fire = std::move(slots_[head_]);
    slots_[head_] = Fire{};  // drop the references now, not when the slot is reused
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
    return fire;
  }

 private:
  void reserve_one() {
    if (size_ < slots_.size()) return;
    std::vector<Fire> grown(slots_.empty() ? 64 : 2 * slots_.size());  // a power of two
    for (std::size_t i = 0; i < size_; ++i) grown[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(grown);
    head_ = 0;
  }

  std::vector<Fire> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace fleetcron::detail
