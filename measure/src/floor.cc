// The body floor's loans.

#include "alkaid/measure/floor.h"

namespace alkaid::measure {

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
