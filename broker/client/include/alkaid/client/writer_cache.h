#pragma once

/// \file
/// WriterCache: which row counts of a producer's batches get a
/// FixedShapeWriter, and the writers waiting for their next batch, for a
/// front end that takes batches of any row count through one call (the C
/// ABI's and Python's loans, Python's publish of an Arrow batch) and sends
/// the counts that come back through the writers' path.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

namespace alkaid::client {

/// The writers of one producer by row count. `Item` is what the caller
/// keeps per writer (the writer itself, or an object holding one and what
/// it hands out), movable.
///
/// A writer keeps one of the channel's shape lines for good (the Message of
/// its shape; ChannelOptions::shape_count, 16 by default), so one is made
/// only for a row count that comes back: ShouldMake says yes for a count
/// seen among the last kRecent asked about without a writer, while fewer
/// than kMaxMade were made (half the default shape lines: the rest serve
/// the producer's other shapes). At most kMaxIdle wait between batches,
/// the oldest let go first. After construction nothing here allocates.
/// Not thread-safe: the caller's lock guards it.
template <typename Item>
class WriterCache {
 public:
  /// Row counts remembered for ShouldMake.
  static constexpr size_t kRecent = 8;
  /// Writers made at most (ShouldMake says no after that many Made calls).
  static constexpr int kMaxMade = 8;
  /// Writers kept waiting for their next batch at most.
  static constexpr size_t kMaxIdle = 4;

  WriterCache() { idle_.reserve(kMaxIdle + 1); }

  /// The newest idle item of `rows` rows, taken out of the cache once
  /// `begin(item)` (a Status-returning call on the item, e.g. the writer's
  /// Begin) succeeded; when it fails, the item stays idle for a later call
  /// and its error is returned. Empty when none of `rows` rows waits.
  template <typename Begin>
  Result<std::optional<Item>> TakeIdle(int64_t rows, Begin&& begin) {
    for (size_t i = idle_.size(); i-- > 0;) {
      if (idle_[i].rows != rows) continue;
      ALKAID_RETURN_NOT_OK(begin(idle_[i].item));
      std::optional<Item> taken(std::move(idle_[i].item));
      idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
      return taken;
    }
    return std::optional<Item>();
  }

  /// Whether to make a writer for `rows` rows (TakeIdle found none):
  /// true if the count was asked about before, among the last kRecent, and
  /// fewer than kMaxMade writers were made. Remembers the count either way.
  bool ShouldMake(int64_t rows) {
    const auto end = recent_.begin() + static_cast<std::ptrdiff_t>(remembered_);
    const bool seen = std::find(recent_.begin(), end, rows) != end;
    recent_[next_recent_] = rows;
    next_recent_ = (next_recent_ + 1) % kRecent;
    remembered_ = std::min(remembered_ + 1, kRecent);
    return seen && made_ < kMaxMade;
  }

  /// Counts a writer made after ShouldMake said yes.
  void Made() { ++made_; }

  /// Writers made so far.
  int made() const { return made_; }

  /// Keeps `item` (of `rows` rows) for the next batch of its row count; the
  /// oldest idle item goes beyond kMaxIdle (destroyed here).
  void Keep(int64_t rows, Item item) {
    if (idle_.size() >= kMaxIdle) idle_.erase(idle_.begin());
    idle_.push_back(Entry{rows, std::move(item)});
  }

  /// Idle items now.
  size_t idle() const { return idle_.size(); }

  /// Destroys every idle item.
  void Clear() { idle_.clear(); }

 private:
  struct Entry {
    int64_t rows;
    Item item;
  };
  std::vector<Entry> idle_;  // oldest first; capacity kMaxIdle + 1
  std::array<int64_t, kRecent> recent_ = {};
  size_t remembered_ = 0;   // of recent_, filled from the front
  size_t next_recent_ = 0;  // where the next count goes
  int made_ = 0;
};

}  // namespace alkaid::client
