// The cache-line floor of the benches, and the body floor's loans.

#include "alkaid/measure/floor.h"

#include <unistd.h>

#include "alkaid/measure/shared_mapping.h"

namespace alkaid::measure {

std::vector<int64_t> FloorSamples(const CpuPair& cpus, uint64_t count, uint64_t warm_up) {
  auto line = SharedMapping<FloorLine>::MapOrDie();
  const pid_t child = ForkPinned(cpus);
  if (child == 0) {
    line->Serve([] { return false; });
    ::_exit(0);
  }
  (void)line->AwaitReady([] { return false; });
  std::vector<int64_t> samples;
  samples.reserve(count);
  for (uint64_t k = 1; k <= warm_up + count; ++k) {
    const int64_t half = line->RoundTrip(k);
    if (k > warm_up) samples.push_back(half);
  }
  line->Quit();
  AwaitChild(child);
  return samples;
}

Result<BodyLoans> BodyLoans::Create(const std::string& name, const shm::ChannelOptions& options,
                                    std::size_t held) {
  BodyLoans loans;
  ALKAID_ASSIGN_OR_RAISE(loans.channel_, shm::ChannelProducer::Create(name, options));
  loans.held_ = held;
  return loans;
}

void BodyLoans::Hold(shm::ChannelLoan loan) {
  held_loans_.push_back(std::move(loan));
  if (held_loans_.size() > held_) held_loans_.pop_front();
}

}  // namespace alkaid::measure
