//! Errors as they cross the boundary: a code the host can act on and a message a
//! person can read. Returned by value; the message is an `RString` whose memory the
//! receiver owns (abi_stable frees it through the allocator that made it).

use abi_stable::std_types::RString;
use abi_stable::StableAbi;

/// What kind of failure an [`AbiError`] is. A `u32` rather than an enum: a newer
/// plugin may send a code this host does not know, which must not be undefined
/// behaviour.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    /// Anything not covered below.
    pub const OTHER: Self = Self(0);
    /// A parameter the plugin does not declare.
    pub const UNKNOWN_PARAMETER: Self = Self(1);
    /// A declared parameter with a value the plugin cannot use.
    pub const INVALID_PARAMETER: Self = Self(2);
    /// The call asks for something the plugin does not offer.
    pub const UNSUPPORTED: Self = Self(3);
    /// Inputs of inconsistent sizes.
    pub const SHAPE: Self = Self(4);
    /// The device (or its driver) failed.
    pub const DEVICE: Self = Self(5);
    /// The plugin panicked; the panic was caught at its edge.
    pub const PANIC: Self = Self(6);

    /// A short name for logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::OTHER => "error",
            Self::UNKNOWN_PARAMETER => "unknown parameter",
            Self::INVALID_PARAMETER => "invalid parameter",
            Self::UNSUPPORTED => "unsupported",
            Self::SHAPE => "shape mismatch",
            Self::DEVICE => "device error",
            Self::PANIC => "panic",
            _ => "unknown error code",
        }
    }
}

/// An error returned by a plugin call.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct AbiError {
    pub code: ErrorCode,
    pub message: RString,
}

impl AbiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: RString::from(message.into()),
        }
    }

    pub fn other(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::OTHER, message)
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UNSUPPORTED, message)
    }

    pub fn shape(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::SHAPE, message)
    }

    pub fn device(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::DEVICE, message)
    }
}

impl std::fmt::Display for AbiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code.name())
    }
}

impl std::error::Error for AbiError {}
