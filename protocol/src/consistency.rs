//! Consistency levels (spec §3, `[consistency]`).

use crate::error::DecodeError;

/// A consistency level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u16)]
pub enum Consistency {
    /// ANY
    Any = 0x0000,
    /// ONE
    One = 0x0001,
    /// TWO
    Two = 0x0002,
    /// THREE
    Three = 0x0003,
    /// QUORUM
    Quorum = 0x0004,
    /// ALL
    All = 0x0005,
    /// LOCAL_QUORUM
    #[default]
    LocalQuorum = 0x0006,
    /// EACH_QUORUM
    EachQuorum = 0x0007,
    /// SERIAL
    Serial = 0x0008,
    /// LOCAL_SERIAL
    LocalSerial = 0x0009,
    /// LOCAL_ONE
    LocalOne = 0x000A,
}

impl Consistency {
    /// Every level.
    pub const ALL: [Consistency; 11] = [
        Consistency::Any,
        Consistency::One,
        Consistency::Two,
        Consistency::Three,
        Consistency::Quorum,
        Consistency::All,
        Consistency::LocalQuorum,
        Consistency::EachQuorum,
        Consistency::Serial,
        Consistency::LocalSerial,
        Consistency::LocalOne,
    ];

    /// The level for a wire value.
    pub fn from_u16(v: u16) -> Result<Self, DecodeError> {
        Consistency::ALL
            .iter()
            .copied()
            .find(|c| *c as u16 == v)
            .ok_or(DecodeError::UnknownCode { what: "consistency", value: v.into() })
    }

    /// Whether this is a serial level (for the conditional part of LWTs).
    pub fn is_serial(self) -> bool {
        matches!(self, Consistency::Serial | Consistency::LocalSerial)
    }
}

impl std::fmt::Display for Consistency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Consistency::Any => "ANY",
            Consistency::One => "ONE",
            Consistency::Two => "TWO",
            Consistency::Three => "THREE",
            Consistency::Quorum => "QUORUM",
            Consistency::All => "ALL",
            Consistency::LocalQuorum => "LOCAL_QUORUM",
            Consistency::EachQuorum => "EACH_QUORUM",
            Consistency::Serial => "SERIAL",
            Consistency::LocalSerial => "LOCAL_SERIAL",
            Consistency::LocalOne => "LOCAL_ONE",
        };
        f.write_str(s)
    }
}
