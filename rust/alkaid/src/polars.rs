//! Received batches as polars `DataFrame`s without a copy (feature
//! `polars`): each column goes through the Arrow C Data Interface from
//! arrow-rs to polars-arrow, which keeps the same buffers.

use polars::prelude::{Column, DataFrame, PlSmallStr, Series};
use polars_arrow::ffi as pffi;

use crate::error::{Error, Result};
use arrow_array::{Array, RecordBatch};

fn polars_error(e: polars::error::PolarsError) -> Error {
    Error::InvalidArgument(format!("polars: {e}"))
}

/// `batch` as a polars `DataFrame`. Primitive columns (integers, floats,
/// booleans, dates, times, timestamps) keep their buffers: the frame's
/// columns are the producer's shared memory, held until the frame (and
/// every series cut from it) is dropped. polars converts what it stores
/// differently (`Utf8`/`Binary` into its string and binary views, for one):
/// those columns are copied by polars' conversion.
pub fn to_dataframe(batch: &RecordBatch) -> Result<DataFrame> {
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        let (ffi_array, ffi_schema) = arrow_array::ffi::to_ffi(&array.to_data())?;
        // SAFETY: arrow-rs's and polars-arrow's structs are both the C Data
        // Interface's `#[repr(C)]` ArrowArray and ArrowSchema (the same size,
        // checked by transmute); ownership moves with them: polars releases
        // them, arrow-rs's Drop does not run.
        let (p_array, p_schema) = unsafe {
            (
                std::mem::transmute::<arrow_data::ffi::FFI_ArrowArray, pffi::ArrowArray>(ffi_array),
                std::mem::transmute::<arrow_schema::ffi::FFI_ArrowSchema, pffi::ArrowSchema>(
                    ffi_schema,
                ),
            )
        };
        // SAFETY: both structs were just exported by arrow-rs and are valid.
        let imported = unsafe {
            let pfield = pffi::import_field_from_c(&p_schema).map_err(polars_error)?;
            pffi::import_array_from_c(p_array, pfield.dtype).map_err(polars_error)?
        };
        let series = Series::from_arrow(PlSmallStr::from(field.name().as_str()), imported)
            .map_err(polars_error)?;
        columns.push(Column::from(series));
    }
    DataFrame::new(batch.num_rows(), columns).map_err(polars_error)
}
