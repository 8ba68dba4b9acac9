// A received body held (ChannelBlock) and the message that carries it
// (ChannelMessage): what a consumer's caller keeps, on any thread, after
// TryReceive.

#include <utility>

#include "alkaid/shm/channel.h"
#include "consumer_returns_internal.h"

namespace alkaid::shm {

// ---------------------------------------------------------------------------
// ChannelBlock

ChannelBlock::ChannelBlock(ChannelBlock&& other) noexcept
    : returns_(std::move(other.returns_)),
      data_(std::exchange(other.data_, {})),
      hold_(other.hold_),
      descriptor_(other.descriptor_),
      generation_(other.generation_),
      held_(std::exchange(other.held_, false)) {}

ChannelBlock& ChannelBlock::operator=(ChannelBlock&& other) noexcept {
  if (this != &other) {
    Reset();
    returns_ = std::move(other.returns_);
    data_ = std::exchange(other.data_, {});
    hold_ = other.hold_;
    descriptor_ = other.descriptor_;
    generation_ = other.generation_;
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

void ChannelBlock::Reset() {
  Release();
  returns_.reset();
}

void ChannelBlock::ReleaseGeneral() {
  // Release let go of a fixed block inline: what is held here is a block
  // of the table, whose return goes through the consumer's queue.
  if (held_) returns_->Push(descriptor_, generation_);
  held_ = false;
  data_ = {};
}

// ---------------------------------------------------------------------------
// ChannelMessage

void ChannelMessage::TakeBodyInto(ChannelBlock* into) {
  if (into == &body_) return;
  if (!body_.held_) {
    into->Reset();
    return;
  }
  into->TakeFrom(&body_);
}

}  // namespace alkaid::shm
