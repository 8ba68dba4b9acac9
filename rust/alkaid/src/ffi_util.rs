//! Small helpers between arrow-rs's C Data Interface structs and the C
//! ABI's (the same `#[repr(C)]` layout, declared twice).

use std::ffi::CString;
use std::path::Path;
use std::time::Duration;

use alkaid_sys as sys;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::Schema;

use crate::error::{Error, Result};

/// arrow-rs's `FFI_ArrowSchema` as the C ABI's `ArrowSchema` (same layout).
pub(crate) fn schema_ptr(s: &mut FFI_ArrowSchema) -> *mut sys::ArrowSchema {
    (s as *mut FFI_ArrowSchema).cast()
}

/// arrow-rs's `FFI_ArrowArray` as the C ABI's `ArrowArray` (same layout).
pub(crate) fn array_ptr(a: &mut arrow_data::ffi::FFI_ArrowArray) -> *mut sys::ArrowArray {
    (a as *mut arrow_data::ffi::FFI_ArrowArray).cast()
}

/// A schema exported by the C ABI into an arrow-rs `Schema` (the export is
/// released when this returns).
pub(crate) fn import_schema(
    fill: impl FnOnce(*mut sys::ArrowSchema) -> sys::alkaid_status,
) -> Result<Schema> {
    let mut ffi = FFI_ArrowSchema::empty();
    crate::error::check(fill(schema_ptr(&mut ffi)))?;
    Ok(Schema::try_from(&ffi)?)
}

/// A C string of `s`, or an error naming `what` if it holds a NUL.
pub(crate) fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidArgument(format!("{what} {s:?} holds a NUL byte")))
}

/// A C string of a path (`None`: no path).
pub(crate) fn c_path(p: Option<&Path>) -> Result<Option<CString>> {
    p.map(|p| {
        use std::os::unix::ffi::OsStrExt;
        CString::new(p.as_os_str().as_bytes()).map_err(|_| {
            Error::InvalidArgument(format!("socket path {} holds a NUL byte", p.display()))
        })
    })
    .transpose()
}

/// Milliseconds for the C ABI: `None` is `ALKAID_FOREVER`; a duration too
/// long for an `i64` of milliseconds is forever as well.
pub(crate) fn millis(d: Option<Duration>) -> i64 {
    match d {
        None => sys::ALKAID_FOREVER,
        Some(d) => i64::try_from(d.as_millis()).unwrap_or(sys::ALKAID_FOREVER),
    }
}

/// Milliseconds of a finite duration, capped at a year (the C ABI adds them
/// to the current time).
pub(crate) fn finite_millis(d: Duration) -> i64 {
    const YEAR_MS: i64 = 365 * 24 * 3600 * 1000;
    i64::try_from(d.as_millis()).unwrap_or(YEAR_MS).min(YEAR_MS)
}
