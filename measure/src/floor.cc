// The body floor's loans, the stream floor's mapping.

#include "alkaid/measure/floor.h"

namespace alkaid::measure {

Status StreamQueue::Map(uint64_t places, uint64_t place_values) {
  ALKAID_RETURN_NOT_OK(counts_.Map(1, "the stream queue's counts"));
  ALKAID_RETURN_NOT_OK(values_.Map(places * place_values, "the stream queue's places"));
  places_ = places;
  place_values_ = place_values;
  return Status::OK();
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
