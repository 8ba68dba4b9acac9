//! A batch written in place in the producer's shared memory and published
//! without a copy.

use std::ffi::c_void;
use std::ptr;

use alkaid_sys as sys;
use arrow_array::ArrowPrimitiveType;
use arrow_schema::DataType;

use crate::error::{check, Error, Result};
use crate::producer::Producer;

/// Space for one batch of the producer's schema, lent by `Producer::loan`.
/// Each accessor hands out a mutable slice over one column's buffer in
/// shared memory (one at a time: each borrows the loan mutably). `publish`
/// sends it without a copy; dropping an unpublished loan gives its space
/// back.
///
/// Validity bitmaps start all valid and offsets all 0. Values (of
/// fixed-width columns, and the value bytes of binary and string columns)
/// are not initialised: they hold whatever the arena held (earlier batches
/// of the channel), so write every one the rows cover. A loan makes no pass
/// over them (a 16 MiB loan costs no 16 MiB memset): the caller's writes
/// are the only one.
pub struct Loan<'p> {
    producer: &'p Producer,
    raw: *mut sys::alkaid_loan,
    rows: i64,
}

impl std::fmt::Debug for Loan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan").field("rows", &self.rows).finish()
    }
}

impl<'p> Loan<'p> {
    pub(crate) fn new(producer: &'p Producer, raw: *mut sys::alkaid_loan, rows: i64) -> Self {
        Self {
            producer,
            raw,
            rows,
        }
    }

    /// Rows of the batch.
    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// The type of `column`, borrowed from the producer's schema (no
    /// reference count or type cloned: `values_mut` is on a sender's path).
    fn data_type(&self, column: usize) -> Result<&'p DataType> {
        let schema = self.producer.schema_ref();
        schema
            .fields()
            .get(column)
            .map(|f| f.data_type())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "column {column} of a schema of {} columns",
                    schema.fields().len()
                ))
            })
    }

    /// Buffer `buffer` of `column` (the C Data Interface's order: 0 the
    /// validity bitmap, 1 values or offsets, 2 value bytes) as raw bytes.
    pub fn buffer_mut(&mut self, column: usize, buffer: usize) -> Result<&mut [u8]> {
        let (data, size) = self.raw_buffer(column, buffer)?;
        if data.is_null() {
            return Ok(&mut []);
        }
        // SAFETY: the library lends `size` writable bytes at `data` until the
        // loan is published or discarded, which needs `self` by value; the
        // slice borrows `self` mutably, so no other slice of it is alive.
        Ok(unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), size) })
    }

    fn raw_buffer(&mut self, column: usize, buffer: usize) -> Result<(*mut c_void, usize)> {
        let col = i32::try_from(column)
            .map_err(|_| Error::InvalidArgument(format!("column {column}")))?;
        let buf = i32::try_from(buffer)
            .map_err(|_| Error::InvalidArgument(format!("buffer {buffer}")))?;
        let mut data: *mut c_void = ptr::null_mut();
        let mut size: i64 = 0;
        // SAFETY: valid loan and out pointers.
        check(unsafe { sys::alkaid_loan_buffer(self.raw, col, buf, &mut data, &mut size) })?;
        Ok((data, size.max(0) as usize))
    }

    /// The validity bitmap of `column` (bit i: row i is valid, all set to
    /// start with); `None` for a non-nullable field. After clearing bits,
    /// say how many with `set_null_count` (else publish counts them).
    pub fn validity_mut(&mut self, column: usize) -> Result<Option<&mut [u8]>> {
        let bytes = self.buffer_mut(column, 0)?;
        Ok(if bytes.is_empty() { None } else { Some(bytes) })
    }

    /// The values of a primitive column as `&mut [T::Native]` (`rows()` of
    /// them). `T` must be the column's type, e.g. `Int64Type` for `Int64`.
    pub fn values_mut<T: ArrowPrimitiveType>(&mut self, column: usize) -> Result<&mut [T::Native]> {
        let dt = self.data_type(column)?;
        let same = std::mem::discriminant(dt) == std::mem::discriminant(&T::DATA_TYPE)
            && dt.primitive_width() == Some(std::mem::size_of::<T::Native>());
        if !same {
            return Err(Error::InvalidArgument(format!(
                "column {column} is {dt}, not {}",
                T::DATA_TYPE
            )));
        }
        let rows = self.rows();
        let (data, size) = self.raw_buffer(column, 1)?;
        let n = size / std::mem::size_of::<T::Native>();
        if n < rows || data.is_null() && rows > 0 {
            return Err(Error::InvalidArgument(format!(
                "column {column}'s values buffer holds {size} bytes for {rows} rows"
            )));
        }
        if rows == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as in buffer_mut; the buffer is 64-byte aligned (the C
        // ABI's promise), any bit pattern is a valid primitive value.
        Ok(unsafe { std::slice::from_raw_parts_mut(data.cast::<T::Native>(), rows) })
    }

    /// The offsets (`rows() + 1` of them, all 0 to start with) and value
    /// bytes of a `Utf8` or `Binary` column. Offsets must start at 0, never
    /// decrease and end inside the value bytes; a `Utf8` column's bytes
    /// must be UTF-8 (the consumer's full verification checks it).
    pub fn binary_mut(&mut self, column: usize) -> Result<(&mut [i32], &mut [u8])> {
        self.var_width::<i32>(column, &[DataType::Utf8, DataType::Binary])
    }

    /// As `binary_mut`, for `LargeUtf8` and `LargeBinary` (64-bit offsets).
    pub fn large_binary_mut(&mut self, column: usize) -> Result<(&mut [i64], &mut [u8])> {
        self.var_width::<i64>(column, &[DataType::LargeUtf8, DataType::LargeBinary])
    }

    fn var_width<O>(&mut self, column: usize, types: &[DataType]) -> Result<(&mut [O], &mut [u8])> {
        let dt = self.data_type(column)?;
        if !types.contains(dt) {
            return Err(Error::InvalidArgument(format!(
                "column {column} is {dt}, not one of {types:?}"
            )));
        }
        let rows = self.rows();
        let (offsets, offsets_size) = self.raw_buffer(column, 1)?;
        let (values, values_size) = self.raw_buffer(column, 2)?;
        if offsets.is_null() || offsets_size < (rows + 1) * std::mem::size_of::<O>() {
            return Err(Error::InvalidArgument(format!(
                "column {column}'s offsets buffer holds {offsets_size} bytes for {rows} rows"
            )));
        }
        // SAFETY: two distinct buffers of the loan (they do not overlap),
        // both writable and aligned; see buffer_mut for the lifetime.
        unsafe {
            let o = std::slice::from_raw_parts_mut(offsets.cast::<O>(), rows + 1);
            let v: &mut [u8] = if values.is_null() {
                &mut []
            } else {
                std::slice::from_raw_parts_mut(values.cast::<u8>(), values_size)
            };
            Ok((o, v))
        }
    }

    /// The number of nulls of `column` (what its validity bitmap says).
    pub fn set_null_count(&mut self, column: usize, null_count: usize) -> Result<()> {
        let col = i32::try_from(column)
            .map_err(|_| Error::InvalidArgument(format!("column {column}")))?;
        // SAFETY: valid loan.
        check(unsafe { sys::alkaid_loan_set_null_count(self.raw, col, null_count as i64) })
    }

    /// Checks the batch (null counts against bitmaps, the offsets of
    /// variable-width columns) and publishes it without a copy. On error the
    /// loan is discarded. The library frees a published loan at the
    /// producer's next loan or close: its arena space is in use until then.
    pub fn publish(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: a live loan of this producer.
        let status = unsafe { sys::alkaid_producer_publish_loan(self.producer.raw(), raw) };
        if status != sys::ALKAID_OK {
            let err = Error::last(status);
            // On error the loan is still ours.
            // SAFETY: not published, discarded once.
            unsafe { sys::alkaid_loan_discard(raw) };
            return Err(err);
        }
        Ok(())
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: an unpublished loan, discarded once.
            unsafe { sys::alkaid_loan_discard(self.raw) };
        }
    }
}
