//! MD5 (RFC 1321), for the ids of the statements the front prepares itself.
//!
//! ScyllaDB names a prepared statement by the MD5 digest of the client's
//! current keyspace followed by the statement text
//! (`query_processor::compute_id` in `cql3/query_processor.cc`), so the same
//! text prepared in the same keyspace gets the same id on every node and
//! after every restart; drivers rely on that when they re-prepare after an
//! UNPREPARED. The front needs the digest for a few short texts only, so it
//! carries this small implementation instead of a dependency.

/// The per-step shift amounts (RFC 1321 §3.4), four per round.
const SHIFTS: [[u32; 4]; 4] = [[7, 12, 17, 22], [5, 9, 14, 20], [4, 11, 16, 23], [6, 10, 15, 21]];

/// The additive constants: the integer part of `abs(sin(i + 1)) * 2^32`.
fn constants() -> [u32; 64] {
    let mut k = [0u32; 64];
    for (i, slot) in k.iter_mut().enumerate() {
        *slot = ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32;
    }
    k
}

/// The 16-byte MD5 digest of `data`.
pub(crate) fn digest(data: &[u8]) -> [u8; 16] {
    let k = constants();
    let mut state: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    // Padding: a 1 bit, zeros up to 56 bytes mod 64, the bit length (LE).
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    for block in message.chunks_exact(64) {
        let mut words = [0u32; 16];
        for (w, bytes) in words.iter_mut().zip(block.chunks_exact(4)) {
            *w = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        let [mut a, mut b, mut c, mut d] = state;
        for i in 0..64 {
            let round = i / 16;
            let (f, g) = match round {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let sum = a.wrapping_add(f).wrapping_add(k[i]).wrapping_add(words[g]);
            let rotated = b.wrapping_add(sum.rotate_left(SHIFTS[round][i % 4]));
            a = d;
            d = c;
            c = b;
            b = rotated;
        }
        for (s, v) in state.iter_mut().zip([a, b, c, d]) {
            *s = s.wrapping_add(v);
        }
    }
    let mut out = [0u8; 16];
    for (chunk, s) in out.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&s.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::digest;

    fn hex(d: [u8; 16]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The test suite of RFC 1321 §A.5.
    #[test]
    fn rfc_1321_test_suite() {
        let cases = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex(digest(input.as_bytes())), want, "{input:?}");
        }
    }
}
