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
      descriptor_(other.descriptor_),
      generation_(other.generation_),
      held_(std::exchange(other.held_, false)) {}

ChannelBlock& ChannelBlock::operator=(ChannelBlock&& other) noexcept {
  if (this != &other) {
    Reset();
    returns_ = std::move(other.returns_);
    data_ = std::exchange(other.data_, {});
    descriptor_ = other.descriptor_;
    generation_ = other.generation_;
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

void ChannelBlock::Reset() {
  if (held_) returns_->Push(descriptor_, generation_);
  held_ = false;
  returns_.reset();
  data_ = {};
}

// ---------------------------------------------------------------------------
// ChannelMessage

void ChannelMessage::TakeBodyInto(ChannelBlock* into) {
  if (into == &body_) return;
  if (into->held_) {
    into->returns_->Push(into->descriptor_, into->generation_);
    into->held_ = false;
  }
  if (!body_.held_) {
    into->returns_.reset();
    into->data_ = {};
    return;
  }
  // A copy of the pointer, not a move: both keep the queue, so neither the
  // next receive nor the next hand-over changes the count.
  if (into->returns_ != body_.returns_) into->returns_ = body_.returns_;
  into->data_ = std::exchange(body_.data_, {});
  into->descriptor_ = body_.descriptor_;
  into->generation_ = body_.generation_;
  into->held_ = std::exchange(body_.held_, false);
}

}  // namespace alkaid::shm
