#pragma once

/// \file
/// Array builders for every type of the format, and MakeBuilder, which
/// assembles the right builder (recursively, for nested types) for any type.
///
/// Typical use:
///
///     ALKAID_ASSIGN_OR_RAISE(auto builder, MakeBuilder(list(int32()), pool));
///     auto* list = static_cast<ListBuilder*>(builder.get());
///     auto* ints = static_cast<Int32Builder*>(list->value_builder());
///     ALKAID_RETURN_NOT_OK(list->Append());
///     ALKAID_RETURN_NOT_OK(ints->Append(7));
///     ALKAID_RETURN_NOT_OK(list->AppendNull());
///     ALKAID_ASSIGN_OR_RAISE(ArrayPtr array, builder->Finish());
///
/// Which class MakeBuilder returns for each type:
///
/// | type                                         | builder                        |
/// |----------------------------------------------|--------------------------------|
/// | null                                         | NullBuilder                    |
/// | bool                                         | BooleanBuilder                 |
/// | int*/uint*, float16/32/64, date*, time*,     | NumericBuilder<C type>         |
/// | timestamp, duration, month interval          | (int32_t/int64_t for temporal) |
/// | day-time / month-day-nano interval           | DayTimeIntervalBuilder, ...    |
/// | fixed_size_binary                            | FixedSizeBinaryBuilder         |
/// | decimal32/64/128/256                         | DecimalBuilder                 |
/// | binary, utf8 / large_binary, large_utf8      | BinaryBuilder, StringBuilder...|
/// | binary_view, utf8_view                       | BinaryViewBuilder, StringView..|
/// | list, large_list                             | ListBuilder, LargeListBuilder  |
/// | list_view, large_list_view                   | ListViewBuilder, LargeList...  |
/// | fixed_size_list                              | FixedSizeListBuilder           |
/// | map                                          | MapBuilder                     |
/// | struct                                       | StructBuilder                  |
/// | sparse_union, dense_union                    | SparseUnionBuilder, DenseUn... |
/// | dictionary                                   | DictionaryBuilder              |
/// | run_end_encoded                              | RunEndEncodedBuilder           |
/// | extension                                    | ExtensionBuilder               |

#include <memory>

#include "alkaid/format/builder_base.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_dict.h"
#include "alkaid/format/builder_nested.h"
#include "alkaid/format/builder_primitive.h"

namespace alkaid::format {

/// A builder for arrays of `type`, child builders included. Fails with
/// TypeError for a dictionary whose value type DictionaryBuilder does not
/// support, and Invalid for a malformed type (e.g. a null child type).
ALKAID_EXPORT Result<std::unique_ptr<ArrayBuilder>> MakeBuilder(
    const TypePtr& type, MemoryPool* pool = default_memory_pool());

}  // namespace alkaid::format
