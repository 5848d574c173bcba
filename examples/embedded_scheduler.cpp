// Embedding the scheduler: two "replicas" in one process share an in-memory
// claimer, so each fire runs once. Runs for about 5 seconds.
//   ./build/gcc/examples/embedded_scheduler
#include <fleetcron/fleetcron.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

int main() {
  using namespace std::chrono_literals;
  auto claimer = std::make_shared<fleetcron::MemoryClaimer>(fleetcron::system_clock(), 10min);
  std::mutex out;
  auto make_replica = [&](std::string name) {
    fleetcron::SchedulerOptions options;
    options.seconds_field = true;
    options.claimer = claimer;
    auto scheduler = std::make_unique<fleetcron::Scheduler>(options);
    scheduler->add("* * * * * *", [&out, name](const fleetcron::FireContext& fire, std::stop_token) {
      std::lock_guard guard(out);
      std::cout << name << " runs " << fire.fire_key << " fence " << fire.fence << '\n';
    }, fleetcron::EntryOptions{.name = "tick", .key = "tick"});
    return scheduler;
  };
  auto a = make_replica("replica-a");
  auto b = make_replica("replica-b");
  a->start();
  b->start();
  std::this_thread::sleep_for(5s);
  a->drain(a->clock().steady_now() + 5s);
  b->drain(b->clock().steady_now() + 5s);
  return 0;
}
