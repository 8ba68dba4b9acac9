//! A received batch (the C ABI's struct array) into an arrow-rs
//! `RecordBatch`, zero-copy, with everything that depends only on the
//! topic's schema worked out once per consumer.
//!
//! arrow-rs's own import (`from_ffi_and_data_type`) rebuilds, per batch, an
//! `ArrayData` of the struct and of each column, looks up each type's layout,
//! and then a `StructArray` is taken apart and its columns checked against
//! the schema again. A consumer knows its schema: the columns of a flat type
//! (fixed-width, boolean, binary and string, the large ones too) are built
//! here straight from their C buffers with the layout resolved at open, and
//! the batch is assembled without re-checking the types it was built from.
//! Nested and dictionary columns take arrow-rs's import.
//!
//! Trust: as with arrow-rs's import (which skips validation too), the
//! buffers are taken as the library exported them. The C++ consumer has
//! checked every batch's structure before exporting it (offsets, lengths and
//! buffer sizes: `Verification::Structure`, the least a consumer does), and
//! the value offsets, indices and UTF-8 as well under `Verification::Full`.

use std::cell::UnsafeCell;
use std::panic::RefUnwindSafe;
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::types::{
    ArrowPrimitiveType, BinaryType, ByteArrayType, LargeBinaryType, LargeUtf8Type, Utf8Type,
};
use arrow_array::{
    downcast_primitive, make_array, Array, ArrayRef, BooleanArray, GenericByteArray,
    PrimitiveArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow_buffer::{
    ArrowNativeType, BooleanBuffer, Buffer, MutableBuffer, NullBuffer, OffsetBuffer, ScalarBuffer,
};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_data::{layout, ArrayDataBuilder, BufferSpec};
use arrow_schema::{ArrowError, DataType, SchemaRef};

use crate::error::Result;

/// The C struct array of one received batch, shared by every buffer made
/// of it: dropped (its `release` called, the block given back) with the
/// last of them, on whichever thread that is.
///
/// The C ABI writes the struct in place, through [`BatchOwner::as_mut_ptr`],
/// while the `Arc` holding it is not shared (the consumer's spare: fresh,
/// or back from a `next` that found nothing); once shared it is only read.
/// That is what the `UnsafeCell` is for: `Arc::get_mut` would prove the
/// `Arc` unshared with an atomic compare-exchange per batch.
pub(crate) struct BatchOwner(UnsafeCell<FFI_ArrowArray>);

// SAFETY: FFI_ArrowArray is Send and Sync (arrow-rs), and the C ABI lets its
// release run on any thread. The cell is written only while the `Arc` is
// unshared (see above), so no reference of another thread can see a write.
unsafe impl Send for BatchOwner {}
// SAFETY: see Send.
unsafe impl Sync for BatchOwner {}
// A panic cannot leave the struct half-written where another thread sees
// it: it is written only while unshared.
impl RefUnwindSafe for BatchOwner {}

impl BatchOwner {
    /// An empty struct (`release` NULL), to be filled by the C ABI.
    pub(crate) fn empty() -> Self {
        Self(UnsafeCell::new(FFI_ArrowArray::empty()))
    }

    /// Where the C ABI writes the struct.
    ///
    /// # Safety
    /// The `Arc` holding `self` is not shared while the pointer is written
    /// through.
    pub(crate) unsafe fn as_mut_ptr(&self) -> *mut FFI_ArrowArray {
        self.0.get()
    }

    /// The struct, read.
    fn get(&self) -> &FFI_ArrowArray {
        // SAFETY: once shared, the struct is never written (see the type's
        // comment); before, only through as_mut_ptr, not while this lives.
        unsafe { &*self.0.get() }
    }
}

impl std::fmt::Debug for BatchOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchOwner")
            .field("length", &self.get().len())
            .finish()
    }
}

/// Hands the batch's owner to the buffers made of it: a clone for each but
/// the last, which takes the consumer's own reference (one atomic increment
/// and one decrement fewer per batch than cloning for every buffer and
/// dropping the original).
struct Owners {
    owner: Option<Arc<BatchOwner>>,
}

impl Owners {
    /// The owner for a buffer; `last`: no other buffer of the batch follows.
    fn share(&mut self, last: bool) -> Result<Arc<BatchOwner>> {
        let owner = if last {
            self.owner.take()
        } else {
            self.owner.clone()
        };
        owner.ok_or_else(|| {
            ArrowError::CDataInterface("a received batch's owner was given away".to_string()).into()
        })
    }
}

/// Makes a primitive array of its values (exactly the array's, offset
/// applied), validity and type, without going through `ArrayData`.
type BuildPrimitive = fn(Buffer, Option<NullBuffer>, &DataType) -> ArrayRef;

/// A column whose type is `T`'s own (`T::DATA_TYPE`): nothing to compare
/// or set per batch.
fn build_primitive<T: ArrowPrimitiveType>(
    values: Buffer,
    nulls: Option<NullBuffer>,
    _data_type: &DataType,
) -> ArrayRef {
    // From the buffer as it is (no slice: a slice clones the buffer's
    // `Arc` and drops the original, two atomic operations).
    let values = ScalarBuffer::<T::Native>::from(values);
    // SAFETY: a validity bitmap, when there is one, was made of as many
    // bits as there are values (import_column).
    Arc::new(unsafe { PrimitiveArray::<T>::new_unchecked(values, nulls) })
}

/// A column of a parameterised type of `T` (a timestamp's zone, a
/// decimal's precision and scale), set on each array.
fn build_primitive_typed<T: ArrowPrimitiveType>(
    values: Buffer,
    nulls: Option<NullBuffer>,
    data_type: &DataType,
) -> ArrayRef {
    let values = ScalarBuffer::<T::Native>::from(values);
    // SAFETY: as in build_primitive.
    let array = unsafe { PrimitiveArray::<T>::new_unchecked(values, nulls) };
    Arc::new(array.with_data_type(data_type.clone()))
}

/// The builder of a column of type `$dt`, whose arrays are `$t`'s: chosen
/// once, at open.
macro_rules! primitive_builder {
    ($t:ty, $dt:expr) => {
        Some(if $dt == &<$t as ArrowPrimitiveType>::DATA_TYPE {
            build_primitive::<$t> as BuildPrimitive
        } else {
            build_primitive_typed::<$t> as BuildPrimitive
        })
    };
}

/// Makes a string or binary array of its offsets (exactly the array's:
/// len + 1 of them), value bytes and validity.
type BuildBytes = fn(Buffer, Buffer, Option<NullBuffer>) -> ArrayRef;

fn build_bytes<T: ByteArrayType>(
    offsets: Buffer,
    values: Buffer,
    nulls: Option<NullBuffer>,
) -> ArrayRef {
    let offsets = ScalarBuffer::<T::Offset>::from(offsets);
    // SAFETY: the offsets are those of a structurally checked array (see
    // the module's comment: monotonic, within the value bytes, as the C++
    // consumer checked; UTF-8 under Verification::Full), as arrow-rs's
    // import trusts them; the bitmap has one bit per value.
    unsafe {
        Arc::new(GenericByteArray::<T>::new_unchecked(
            OffsetBuffer::new_unchecked(offsets),
            values,
            nulls,
        ))
    }
}

/// How one column's buffers are laid out, from its type.
#[derive(Clone, Copy)]
enum Layout {
    /// Validity, then `width`-byte values aligned to `align`; `build` makes
    /// the array of a primitive type directly (None: fixed-size binary).
    Fixed {
        width: usize,
        align: usize,
        build: Option<BuildPrimitive>,
    },
    /// Validity, then a bitmap of values (boolean).
    Bits,
    /// Validity, offsets of `offset_width` bytes, value bytes; `build`
    /// makes the string or binary array.
    Variable {
        offset_width: usize,
        build: BuildBytes,
    },
}

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layout::Fixed { width, .. } => write!(f, "Fixed({width})"),
            Layout::Bits => f.write_str("Bits"),
            Layout::Variable { offset_width, .. } => write!(f, "Variable({offset_width})"),
        }
    }
}

#[derive(Debug)]
struct Column {
    data_type: DataType,
    layout: Layout,
}

/// Imports the batches of one schema (a consumer's).
#[derive(Debug)]
pub(crate) struct BatchImporter {
    schema: SchemaRef,
    struct_type: DataType,
    /// One per field when every field is of a flat type; `None` otherwise
    /// (then every batch takes arrow-rs's import).
    columns: Option<Vec<Column>>,
    /// What an empty buffer of a batch becomes (cloned: no allocation).
    empty: Buffer,
}

fn column_layout(data_type: &DataType) -> Option<Layout> {
    let variable = |offset_width, build| {
        Some(Layout::Variable {
            offset_width,
            build,
        })
    };
    match data_type {
        DataType::Boolean => return Some(Layout::Bits),
        DataType::Utf8 => return variable(4, build_bytes::<Utf8Type> as BuildBytes),
        DataType::Binary => return variable(4, build_bytes::<BinaryType> as BuildBytes),
        DataType::LargeUtf8 => return variable(8, build_bytes::<LargeUtf8Type> as BuildBytes),
        DataType::LargeBinary => return variable(8, build_bytes::<LargeBinaryType> as BuildBytes),
        _ => {}
    }
    let l = layout(data_type);
    if !data_type.is_primitive() && !matches!(data_type, DataType::FixedSizeBinary(_)) {
        return None;
    }
    match (l.can_contain_null_mask, l.variadic, l.buffers.as_slice()) {
        (
            true,
            false,
            [BufferSpec::FixedWidth {
                byte_width,
                alignment,
            }],
        ) => Some(Layout::Fixed {
            width: *byte_width,
            align: *alignment,
            build: downcast_primitive! {
                data_type => (primitive_builder, data_type),
                _ => None,
            },
        }),
        _ => None,
    }
}

impl BatchImporter {
    /// The importer of `schema`'s batches.
    pub(crate) fn new(schema: SchemaRef) -> Self {
        let columns = schema
            .fields()
            .iter()
            .map(|f| {
                column_layout(f.data_type()).map(|layout| Column {
                    data_type: f.data_type().clone(),
                    layout,
                })
            })
            .collect();
        let struct_type = DataType::Struct(schema.fields().clone());
        Self {
            schema,
            struct_type,
            columns,
            // Aligned for any type (a `Vec`'s empty pointer is not).
            empty: MutableBuffer::new(0).into(),
        }
    }

    /// The schema the batches get.
    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The batch in `ffi`, a struct array of the schema with no nulls of its
    /// own, as `alkaid_consumer_next` exports it. Its buffers stay where
    /// they are; `ffi` is released when the last of them is dropped.
    ///
    /// # Safety
    /// `ffi` is a valid C Data Interface struct array of the schema.
    #[cfg(test)]
    pub(crate) unsafe fn import(&self, ffi: FFI_ArrowArray) -> Result<RecordBatch> {
        // SAFETY: the caller's promise.
        unsafe { self.import_owned(Arc::new(BatchOwner(UnsafeCell::new(ffi)))) }
    }

    /// As `import`, of a struct array already in the `Arc` that its
    /// buffers will share (`Consumer::next_batch` has the C ABI fill it in
    /// place): one allocation for the batch's owner, no copy of the struct.
    /// A batch that takes arrow-rs's import (not flat) is moved out of the
    /// owner, which is left empty.
    ///
    /// # Safety
    /// `owner` holds a valid C Data Interface struct array of the schema;
    /// whoever else holds `owner` does not read it (the consumer keeps a
    /// reference until its next call).
    pub(crate) unsafe fn import_owned(&self, owner: Arc<BatchOwner>) -> Result<RecordBatch> {
        let ffi = owner.get();
        match &self.columns {
            Some(columns)
                if ffi.offset() == 0
                    && ffi.null_count_opt() == Some(0)
                    && ffi.num_children() == columns.len() =>
            {
                // SAFETY: the caller's promise.
                unsafe { self.import_flat(owner, columns) }
            }
            _ => {
                // SAFETY: no one else reads the struct (the caller's
                // promise); arrow-rs's import takes it over, release and all.
                let ffi = unsafe { std::ptr::replace(owner.as_mut_ptr(), FFI_ArrowArray::empty()) };
                // SAFETY: the caller's promise.
                unsafe { self.import_any(ffi) }
            }
        }
    }

    /// arrow-rs's import, for any type.
    unsafe fn import_any(&self, ffi: FFI_ArrowArray) -> Result<RecordBatch> {
        // SAFETY: the caller's promise.
        let data =
            unsafe { arrow_array::ffi::from_ffi_and_data_type(ffi, self.struct_type.clone()) }?;
        let array = StructArray::from(data);
        let rows = array.len();
        let (_, columns, _) = array.into_parts();
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    unsafe fn import_flat(
        &self,
        owner: Arc<BatchOwner>,
        columns: &[Column],
    ) -> Result<RecordBatch> {
        // The struct stays where it is while `owners` (or a buffer) holds
        // the Arc: a reference into it is valid until the end of this call
        // (the buffers made here hold it longer).
        let ffi: *const FFI_ArrowArray = owner.get();
        // SAFETY: see above.
        let ffi = unsafe { &*ffi };
        let rows = ffi.len();
        let mut owners = Owners { owner: Some(owner) };
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
        let n = columns.len();
        for (i, column) in columns.iter().enumerate() {
            let c = ffi.child(i);
            if c.len() != rows {
                return Err(ArrowError::CDataInterface(format!(
                    "column {i} of a received batch has {} rows, the batch {rows}",
                    c.len()
                ))
                .into());
            }
            // SAFETY: the caller's promise, for the child.
            let array = unsafe { self.import_column(c, column, &mut owners, i + 1 == n) }?;
            arrays.push(array);
        }
        // SAFETY: each column was built with its field's type, of `rows`
        // rows (checked above), one per field.
        Ok(unsafe { RecordBatch::new_unchecked(self.schema.clone(), arrays, rows) })
    }

    /// A buffer over `bytes` bytes at `ptr`, held by the batch's owner:
    /// zero-copy when `ptr` is aligned to `align`, a copy otherwise
    /// (arrow-rs needs its typed buffers aligned; Alkaid's are 64-byte
    /// aligned, so this is for safety, not for the data path). The shared
    /// empty buffer for zero bytes, whatever the pointer. `last`: the last
    /// buffer of the batch (it takes the owner rather than a clone).
    ///
    /// # Safety
    /// `ptr` is valid for reads of `bytes` bytes while the owner is alive.
    unsafe fn buffer(
        &self,
        ptr: *const u8,
        bytes: usize,
        align: usize,
        owners: &mut Owners,
        last: bool,
    ) -> Result<Buffer> {
        if bytes == 0 {
            return Ok(self.empty.clone());
        }
        let Some(p) = NonNull::new(ptr.cast_mut()) else {
            return Err(ArrowError::CDataInterface(format!(
                "a received buffer of {bytes} bytes has a null pointer"
            ))
            .into());
        };
        if !(ptr as usize).is_multiple_of(align) {
            // SAFETY: the caller's promise.
            return Ok(Buffer::from(unsafe {
                std::slice::from_raw_parts(ptr, bytes)
            }));
        }
        let owner = owners.share(last)?;
        // SAFETY: the caller's promise; the owner keeps the C array (and so
        // the block in shared memory) alive until the last buffer is dropped.
        Ok(unsafe { Buffer::from_custom_allocation(p, bytes, owner) })
    }

    /// One column of a flat type, its buffers held by the batch's owner;
    /// `last`: the batch's last column.
    ///
    /// # Safety
    /// `c` is a valid C array of `column`'s type, held by the owner.
    unsafe fn import_column(
        &self,
        c: &FFI_ArrowArray,
        column: &Column,
        owners: &mut Owners,
        last: bool,
    ) -> Result<ArrayRef> {
        let (len, offset) = (c.len(), c.offset());
        let end = len + offset;
        let want_buffers = match column.layout {
            Layout::Fixed { .. } | Layout::Bits => 2,
            Layout::Variable { .. } => 3,
        };
        if c.num_buffers() != want_buffers || c.num_children() != 0 {
            return Err(ArrowError::CDataInterface(format!(
                "a received {} column has {} buffers and {} children, not {want_buffers} and 0",
                column.data_type,
                c.num_buffers(),
                c.num_children()
            ))
            .into());
        }
        let nulls = match c.null_count_opt() {
            Some(0) => None,
            _ if c.buffer(0).is_null() => None,
            count => {
                // SAFETY: a validity bitmap covers offset + len bits.
                let bits = unsafe { self.buffer(c.buffer(0), end.div_ceil(8), 1, owners, false) }?;
                let bits = BooleanBuffer::new(bits, offset, len);
                Some(match count {
                    // SAFETY: the exporter's count of the bitmap's zeros.
                    Some(n) => unsafe { NullBuffer::new_unchecked(bits, n) },
                    None => NullBuffer::new(bits),
                })
            }
        };
        // SAFETY (each buffer below): buffer sizes as the C Data Interface
        // lays them out for offset + len elements.
        let values = match column.layout {
            Layout::Fixed {
                width,
                align,
                build: Some(build),
            } => {
                // The array's own values: from `offset`, `len` of them.
                let at = c.buffer(1).wrapping_add(offset * width);
                let values = unsafe { self.buffer(at, len * width, align, owners, last) }?;
                return Ok(build(values, nulls, &column.data_type));
            }
            Layout::Fixed { width, align, .. } => {
                unsafe { self.buffer(c.buffer(1), end * width, align, owners, last) }?
            }
            Layout::Bits => {
                let bits = unsafe { self.buffer(c.buffer(1), end.div_ceil(8), 1, owners, last) }?;
                return Ok(Arc::new(BooleanArray::new(
                    BooleanBuffer::new(bits, offset, len),
                    nulls,
                )));
            }
            Layout::Variable {
                offset_width,
                build,
            } => {
                let offsets_ptr = c.buffer(1);
                let (offsets, value_bytes) = if offsets_ptr.is_null() && end == 0 {
                    // An empty array may come without offsets; arrow-rs
                    // wants one.
                    (MutableBuffer::from_len_zeroed(offset_width).into(), 0)
                } else {
                    // The array's own offsets: from `offset`, len + 1.
                    let at = offsets_ptr.wrapping_add(offset * offset_width);
                    let offsets = unsafe {
                        self.buffer(at, (len + 1) * offset_width, offset_width, owners, false)
                    }?;
                    let last_offset = if offset_width == 4 {
                        last_value::<i32>(&offsets)
                    } else {
                        last_value::<i64>(&offsets)
                    };
                    let last_offset = usize::try_from(last_offset).map_err(|_| {
                        ArrowError::CDataInterface(format!("a received offset is {last_offset}"))
                    })?;
                    (offsets, last_offset)
                };
                let values = unsafe { self.buffer(c.buffer(2), value_bytes, 1, owners, last) }?;
                return Ok(build(offsets, values, nulls));
            }
        };
        let data = ArrayDataBuilder::new(column.data_type.clone())
            .len(len)
            .offset(offset)
            .nulls(nulls)
            .buffers(vec![values]);
        // SAFETY: the buffers are those of a structurally checked array of this
        // type (see the module's comment): arrow-rs's import trusts them as far.
        Ok(make_array(unsafe { data.build_unchecked() }))
    }
}

/// The last value of a buffer of offsets, as an i64.
fn last_value<O: ArrowNativeType + Into<i64>>(offsets: &Buffer) -> i64 {
    offsets.typed_data::<O>().last().map_or(0, |&o| o.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int32Type;
    use arrow_array::{
        BinaryArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Float64Array, Int32Array,
        Int64Array, LargeStringArray, ListArray, StringArray, TimestampMicrosecondArray,
        UInt8Array,
    };
    use arrow_schema::{Field, Schema};

    /// `batch` through the C Data Interface (as arrow-rs exports it, the
    /// struct of its columns) and back through `importer`.
    fn round_trip(importer: &BatchImporter, batch: &RecordBatch) -> RecordBatch {
        let array = StructArray::from(batch.clone());
        let ffi = FFI_ArrowArray::new(&array.to_data());
        // SAFETY: a struct array of the importer's schema, just exported.
        unsafe { importer.import(ffi) }.unwrap()
    }

    fn flat_batch() -> RecordBatch {
        let tz: Arc<str> = "Europe/Paris".into();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..100)),
            Arc::new(Int32Array::from_iter(
                (0..100).map(|i| (i % 3 != 0).then_some(i)),
            )),
            Arc::new(UInt8Array::from_iter_values((0..100).map(|i| i as u8))),
            Arc::new(Float64Array::from_iter(
                (0..100).map(|i| (i % 7 != 0).then_some(i as f64 / 2.0)),
            )),
            Arc::new(BooleanArray::from_iter(
                (0..100).map(|i| (i % 5 != 0).then_some(i % 2 == 0)),
            )),
            Arc::new(StringArray::from_iter(
                (0..100).map(|i| (i % 4 != 0).then(|| format!("s{i}"))),
            )),
            Arc::new(LargeStringArray::from_iter_values(
                (0..100).map(|i| "x".repeat(i % 9)),
            )),
            Arc::new(BinaryArray::from_iter_values(
                (0..100).map(|i| vec![i as u8; i % 5]),
            )),
            Arc::new(TimestampMicrosecondArray::from_iter_values(0..100).with_timezone(tz.clone())),
            Arc::new(
                Decimal128Array::from_iter(
                    (0..100).map(|i| (i % 6 != 0).then_some(i as i128 * 1000)),
                )
                .with_precision_and_scale(20, 3)
                .unwrap(),
            ),
            Arc::new(
                FixedSizeBinaryArray::try_from_iter((0..100).map(|i: u32| i.to_le_bytes()))
                    .unwrap(),
            ),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), c.null_count() > 0))
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    #[test]
    fn flat_columns_arrive_equal_and_in_place() {
        let batch = flat_batch();
        let importer = BatchImporter::new(batch.schema());
        assert!(
            importer.columns.is_some(),
            "every column of the batch is flat"
        );
        // Whole, and sliced (each column then has an offset).
        for b in [batch.clone(), batch.slice(13, 50), batch.slice(100, 0)] {
            let got = round_trip(&importer, &b);
            assert_eq!(got, b);
            for (g, w) in got.columns().iter().zip(b.columns()) {
                let (g, w) = (g.to_data(), w.to_data());
                for (gb, wb) in g.buffers().iter().zip(w.buffers()) {
                    if !wb.is_empty() {
                        assert_eq!(gb.as_ptr(), wb.as_ptr(), "{}: not in place", g.data_type());
                    }
                }
            }
        }
    }

    #[test]
    fn nested_columns_take_arrow_rs_import() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(
            (0..50).map(|i| (i % 3 != 0).then(|| (0..i % 4).map(Some).collect::<Vec<_>>())),
        );
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("l", list.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..50)),
                Arc::new(list),
            ],
        )
        .unwrap();
        let importer = BatchImporter::new(schema);
        assert!(importer.columns.is_none());
        assert_eq!(round_trip(&importer, &batch), batch);
        assert_eq!(
            round_trip(&importer, &batch.slice(7, 20)),
            batch.slice(7, 20)
        );
    }

    #[test]
    fn a_column_of_the_wrong_shape_is_an_error() {
        // The schema says two columns of int64; the array has a utf8 column
        // as its second (three buffers, not two).
        let batch = flat_batch();
        let wrong = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Int64, true),
        ]));
        let two = RecordBatch::try_new(
            batch.schema().project(&[0, 5]).map(Arc::new).unwrap(),
            vec![batch.column(0).clone(), batch.column(5).clone()],
        )
        .unwrap();
        let importer = BatchImporter::new(wrong);
        let array = StructArray::from(two);
        let ffi = FFI_ArrowArray::new(&array.to_data());
        // SAFETY: deliberately not of the schema: the check must catch it.
        let err = unsafe { importer.import(ffi) }.unwrap_err();
        assert!(err.to_string().contains("3 buffers"), "{err}");
    }
}
