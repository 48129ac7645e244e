//! A hasher for the names the protocol carries: keyspaces, tables and
//! columns. They are short, and they come from the cluster's own schema,
//! so maps keyed by them need no defence against crafted keys. The
//! default SipHash spends tens of cycles on such a name. FNV-1a, used
//! here, takes a few, and these lookups run on every request (the
//! driver's replica tables) or every value read by name (the CDC rows).

use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a, 64-bit (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        NameHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Builds [`NameHasher`]s, for `HashMap::with_hasher` and the like.
pub type BuildNameHasher = BuildHasherDefault<NameHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The published FNV-1a 64-bit test values.
    #[test]
    fn fnv1a_64_reference_values() {
        for (input, expected) in
            [(&b""[..], 0xcbf2_9ce4_8422_2325_u64), (b"a", 0xaf63_dc4c_8601_ec8c), (b"foobar", 0x8594_4171_f739_67e8)]
        {
            let mut h = NameHasher::default();
            h.write(input);
            assert_eq!(h.finish(), expected, "{input:?}");
        }
    }
}
