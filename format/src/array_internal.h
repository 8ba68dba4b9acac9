#pragma once

// Typed arrays made as the objects of a graph whose links hold no count
// (BatchTemplate's, batch_template.cc): made with the graph's maker of
// child arrays, and ended by forgetting their links. Not installed.

#include "alkaid/format/array.h"

namespace alkaid::format::internal {

/// Whether NewLinkedArray makes an array of `type`: every class but a
/// dictionary's (which keeps an array data of its own for its indices) and
/// an extension's over an extension, at any depth. An extension's storage
/// array is then `make.storage`'s.
bool LinkableArrayType(const DataType& type);

/// The typed array of `data` (moved in as it is: a link stays a link),
/// with its children's arrays made by `make`, allocated with new for the
/// caller to own; null for a type LinkableArrayType refuses.
Array* NewLinkedArray(ArrayDataPtr data, const ChildArrays& make);

/// Ends `array`'s own pointers (its data and its children's arrays)
/// without a decrement of their counts (they are links that hold none);
/// the array may then be deleted.
void ForgetLinks(Array* array);

}  // namespace alkaid::format::internal
