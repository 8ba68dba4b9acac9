//! The crate's error type: a status of the C ABI with its message, or an
//! error of arrow-rs (a schema or array it could not import or export).

use std::ffi::CStr;
use std::fmt;

use alkaid_sys as sys;
use arrow_schema::ArrowError;

/// The status codes of the C ABI (`alkaid_status`), the same numbers as
/// Alkaid's C++ `StatusCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StatusCode {
    /// Malformed input or an invalid argument.
    Invalid,
    /// An operation not defined for this type.
    TypeError,
    /// An index or range out of bounds.
    IndexError,
    /// No such topic or column.
    KeyError,
    /// A size or count beyond a limit.
    CapacityError,
    /// Heap or shared memory exhausted.
    OutOfMemory,
    /// A system call failed; no broker answers.
    IoError,
    /// Valid input this build cannot handle.
    NotImplemented,
    /// Metadata could not be encoded or decoded.
    SerializationError,
    /// A named resource exists already.
    AlreadyExists,
    /// A wait ended before its condition held.
    TimedOut,
    /// The caller may not do this.
    PermissionDenied,
    /// The topic has ended (the iterator turns it into its end).
    EndOfStream,
    /// Stopped by a `cancel` call.
    Cancelled,
    /// Anything else, or a code this crate does not know (the raw value).
    Unknown(i32),
}

impl StatusCode {
    /// The code for a raw `alkaid_status` that is not `ALKAID_OK`.
    pub fn from_raw(status: sys::alkaid_status) -> Self {
        match status {
            sys::ALKAID_INVALID => Self::Invalid,
            sys::ALKAID_TYPE_ERROR => Self::TypeError,
            sys::ALKAID_INDEX_ERROR => Self::IndexError,
            sys::ALKAID_KEY_ERROR => Self::KeyError,
            sys::ALKAID_CAPACITY_ERROR => Self::CapacityError,
            sys::ALKAID_OUT_OF_MEMORY => Self::OutOfMemory,
            sys::ALKAID_IO_ERROR => Self::IoError,
            sys::ALKAID_NOT_IMPLEMENTED => Self::NotImplemented,
            sys::ALKAID_SERIALIZATION_ERROR => Self::SerializationError,
            sys::ALKAID_ALREADY_EXISTS => Self::AlreadyExists,
            sys::ALKAID_TIMED_OUT => Self::TimedOut,
            sys::ALKAID_PERMISSION_DENIED => Self::PermissionDenied,
            sys::ALKAID_END_OF_STREAM => Self::EndOfStream,
            sys::ALKAID_CANCELLED => Self::Cancelled,
            other => Self::Unknown(other),
        }
    }

    /// The raw `alkaid_status` value.
    pub fn raw(self) -> sys::alkaid_status {
        match self {
            Self::Invalid => sys::ALKAID_INVALID,
            Self::TypeError => sys::ALKAID_TYPE_ERROR,
            Self::IndexError => sys::ALKAID_INDEX_ERROR,
            Self::KeyError => sys::ALKAID_KEY_ERROR,
            Self::CapacityError => sys::ALKAID_CAPACITY_ERROR,
            Self::OutOfMemory => sys::ALKAID_OUT_OF_MEMORY,
            Self::IoError => sys::ALKAID_IO_ERROR,
            Self::NotImplemented => sys::ALKAID_NOT_IMPLEMENTED,
            Self::SerializationError => sys::ALKAID_SERIALIZATION_ERROR,
            Self::AlreadyExists => sys::ALKAID_ALREADY_EXISTS,
            Self::TimedOut => sys::ALKAID_TIMED_OUT,
            Self::PermissionDenied => sys::ALKAID_PERMISSION_DENIED,
            Self::EndOfStream => sys::ALKAID_END_OF_STREAM,
            Self::Cancelled => sys::ALKAID_CANCELLED,
            Self::Unknown(raw) => raw,
        }
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: alkaid_status_name returns a static string for any value.
        let name = unsafe { CStr::from_ptr(sys::alkaid_status_name(self.raw())) };
        f.write_str(&name.to_string_lossy())
    }
}

/// An error of this crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A call of the C ABI failed: its status and the message it left.
    Alkaid {
        /// The status code.
        code: StatusCode,
        /// What was wrong and where, as the library said it.
        message: String,
    },
    /// arrow-rs could not import or export a schema or an array.
    Arrow(ArrowError),
    /// An argument the crate refused before calling the C ABI (a column
    /// index out of range, a type that does not match, a NUL in a name).
    InvalidArgument(String),
}

impl Error {
    /// The C ABI's status code: `Invalid` for an `InvalidArgument`, `None`
    /// for an arrow-rs error.
    pub fn code(&self) -> Option<StatusCode> {
        match self {
            Self::Alkaid { code, .. } => Some(*code),
            Self::InvalidArgument(_) => Some(StatusCode::Invalid),
            Self::Arrow(_) => None,
        }
    }

    /// Whether a wait ended without its condition (`StatusCode::TimedOut`).
    pub fn is_timed_out(&self) -> bool {
        self.code() == Some(StatusCode::TimedOut)
    }

    /// Whether a `cancel` call stopped the operation.
    pub fn is_cancelled(&self) -> bool {
        self.code() == Some(StatusCode::Cancelled)
    }

    /// The error of a failed call: `status` with this thread's last-error
    /// message. Call it right after the call, on the same thread.
    pub(crate) fn last(status: sys::alkaid_status) -> Self {
        // SAFETY: alkaid_last_error returns a valid C string of this thread.
        let message = unsafe { CStr::from_ptr(sys::alkaid_last_error()) }
            .to_string_lossy()
            .into_owned();
        Self::Alkaid {
            code: StatusCode::from_raw(status),
            message,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Alkaid { code, message } => write!(f, "{code}: {message}"),
            Self::Arrow(e) => write!(f, "arrow: {e}"),
            Self::InvalidArgument(m) => write!(f, "Invalid: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Arrow(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ArrowError> for Error {
    fn from(e: ArrowError) -> Self {
        Self::Arrow(e)
    }
}

/// This crate's `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `Ok(())` for `ALKAID_OK`, else the last error.
pub(crate) fn check(status: sys::alkaid_status) -> Result<()> {
    if status == sys::ALKAID_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}
