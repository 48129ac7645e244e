//! splitmix64: the one small, deterministic generator of this crate
//! (random bits of stream ids and timeuuids in the front, seeded workloads
//! in its tests), so nothing needs a random-number crate.

/// The generator's increment (the golden gamma).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function of one state.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A splitmix64 generator; the same seed gives the same sequence.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An `i32` in `0..n` (`n > 0`).
    pub fn int(&mut self, n: i32) -> i32 {
        self.below(n.max(1) as u64) as i32
    }

    /// True with the given percentage.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items` (not empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}
