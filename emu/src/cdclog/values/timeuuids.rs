//! Version-1 UUIDs to and from microseconds, as Scylla builds `cdc$time`.

/// The offset of UUID time (100 ns since 1582-10-15) from the Unix epoch.
const UUID_EPOCH_OFFSET: i64 = 0x01B2_1DD2_1381_4000;

/// A version-1 UUID whose 60-bit timestamp is `micros × 10 +
/// 0x01B21DD213814000` (so the exact microsecond can be read back), with
/// clock sequence and node from `random` and the variant bits `10`, as
/// Scylla builds `cdc$time` (`docs/cdc-log.md` §3.2). The timestamp wraps
/// outside years 1582–5236.
pub fn timeuuid_from_micros(micros: i64, random: u64) -> [u8; 16] {
    let t = (i128::from(micros) * 10 + i128::from(UUID_EPOCH_OFFSET)) as u64 & 0x0FFF_FFFF_FFFF_FFFF;
    let msb = (t << 32) | ((t >> 16) & 0xFFFF_0000) | 0x1000 | (t >> 48);
    let lsb = (random & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    ((u128::from(msb) << 64) | u128::from(lsb)).to_be_bytes()
}

/// The microseconds since the Unix epoch of a version-1 UUID's timestamp
/// (rounded down to a microsecond).
pub fn micros_of_timeuuid(uuid: &[u8; 16]) -> i64 {
    let msb = (u128::from_be_bytes(*uuid) >> 64) as u64;
    let t = ((msb & 0x0FFF) << 48) | ((msb >> 16) & 0xFFFF) << 32 | (msb >> 32);
    (t as i64 - UUID_EPOCH_OFFSET).div_euclid(10)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::cmp::Ordering;

    use uuid::Uuid;

    use super::super::compare;
    use super::super::testing::*;
    use super::*;

    #[test]
    fn timeuuids_carry_the_exact_microsecond() {
        // docs/cdc-log.md §3.2: b223c55e-6d07-11ea-7654-24e4fb3f20b9 → 1584969040910883 µs.
        let doc = *Uuid::parse_str("b223c55e-6d07-11ea-7654-24e4fb3f20b9").unwrap().as_bytes();
        assert_eq!(micros_of_timeuuid(&doc), 1_584_969_040_910_883);
        let made = timeuuid_from_micros(1_584_969_040_910_883, 0x7654_24e4_fb3f_20b9);
        assert_eq!(made[..8], doc[..8]);
        assert_eq!(made[8..], [0xb6, 0x54, 0x24, 0xe4, 0xfb, 0x3f, 0x20, 0xb9], "variant bits forced to 10");
        for micros in [0, 1, -1, 1_700_000_000_123_456, -12_219_292_800_000_000] {
            for random in [0, u64::MAX, 0x1234_5678_9abc_def0] {
                let u = timeuuid_from_micros(micros, random);
                let parsed = Uuid::from_bytes(u);
                assert_eq!((parsed.get_version_num(), parsed.get_variant()), (1, uuid::Variant::RFC4122));
                assert_eq!(micros_of_timeuuid(&u), micros);
            }
        }
        // Later microseconds sort later whatever the random bits.
        let a = timeuuid_from_micros(1_000_000, u64::MAX);
        let b = timeuuid_from_micros(1_000_001, 0);
        assert_eq!(compare(&T::Timeuuid, &a, &b), Ordering::Less);
    }
}
