//! The `latte` module scripts import: data generators (`latte::hash`,
//! `latte::hash2`, `latte::hash_range`, `latte::blob`, `latte::text`,
//! `latte::uuid`, `latte::normal`, `latte::uniform`), the `latte::param!`
//! macro, and the types scripts meet (`Context`, the error of its calls, `Uuid`).
//!
//! Generators are pure functions of their seed: the same cycle number gives
//! the same key, so `run` can read what `load` wrote. The numbers come from
//! a SplitMix64 stream (Steele, Lea, Flood: "Fast splittable pseudorandom
//! number generators", OOPSLA 2014), written here; they are not latte's own
//! numbers, only its contracts (ranges, lengths, determinism).

use std::collections::HashMap;
use std::sync::Arc;

use rune::alloc::fmt::TryWrite;
use rune::ast;
use rune::macros::{quote, MacroContext, TokenStream};
use rune::parse::Parser;
use rune::runtime::{Bytes, Formatter, VmResult};
use rune::{Any, ContextError, Module};

use crate::context;

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A deterministic stream of 64-bit numbers from a seed.
struct Stream(u64);

impl Stream {
    fn new(seed: i64) -> Stream {
        Stream(mix(seed as u64))
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }
    /// Uniform in (0, 1]: never 0, so that its logarithm is finite.
    fn next_unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

/// A non-negative hash of `i` (0..=i64::MAX).
pub fn hash_of(i: i64) -> i64 {
    (mix((i as u64).wrapping_add(GAMMA)) >> 1) as i64
}

/// `latte::hash(i)`: a non-negative integer hash of `i`.
#[rune::function]
fn hash(i: i64) -> i64 {
    hash_of(i)
}

/// `latte::hash2(a, b)`: a non-negative integer hash of two integers.
#[rune::function]
fn hash2(a: i64, b: i64) -> i64 {
    hash_of(hash_of(a) ^ b.rotate_left(17))
}

/// `latte::hash_range(i, max)`: a hash of `i` in `0..max`.
#[rune::function]
fn hash_range(i: i64, max: i64) -> VmResult<i64> {
    if max <= 0 {
        return VmResult::panic(format!("latte::hash_range({i}, {max}): max must be positive"));
    }
    VmResult::Ok(hash_of(i) % max)
}

/// The longest blob or text a generator makes: a CQL frame's body is at
/// most 256 MiB, and a script's typo must not exhaust the memory.
const MAX_GENERATED: usize = 256 << 20;

/// `latte::blob(seed, len)`: `len` pseudo-random bytes.
#[rune::function]
fn blob(seed: i64, len: usize) -> VmResult<Bytes> {
    if len > MAX_GENERATED {
        return VmResult::panic(format!("latte::blob: length {len} is over {MAX_GENERATED}"));
    }
    let mut s = Stream::new(seed);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let word = s.next_u64().to_le_bytes();
        let take = (len - out.len()).min(8);
        out.extend_from_slice(&word[..take]);
    }
    match Bytes::from_slice(out) {
        Ok(b) => VmResult::Ok(b),
        Err(e) => VmResult::panic(format!("latte::blob: {e}")),
    }
}

/// The characters of `latte::text`.
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// `latte::text(seed, len)`: `len` pseudo-random letters and digits.
#[rune::function]
fn text(seed: i64, len: usize) -> VmResult<String> {
    if len > MAX_GENERATED {
        return VmResult::panic(format!("latte::text: length {len} is over {MAX_GENERATED}"));
    }
    let mut s = Stream::new(seed);
    VmResult::Ok((0..len).map(|_| ALPHABET[(s.next_u64() % ALPHABET.len() as u64) as usize] as char).collect())
}

/// `latte::normal(i, mean, std_dev)`: a normally distributed number, the
/// same for the same `i` (Box–Muller).
#[rune::function]
fn normal(i: i64, mean: f64, std_dev: f64) -> VmResult<f64> {
    if !(std_dev.is_finite() && std_dev >= 0.0 && mean.is_finite()) {
        return VmResult::panic(format!(
            "latte::normal: mean {mean} and std_dev {std_dev} must be finite, std_dev >= 0"
        ));
    }
    let mut s = Stream::new(i);
    let (u1, u2) = (s.next_unit(), s.next_unit());
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    VmResult::Ok(mean + std_dev * z)
}

/// `latte::uniform(i, min, max)`: a uniformly distributed number in `min..max`.
#[rune::function]
fn uniform(i: i64, min: f64, max: f64) -> VmResult<f64> {
    if !(min.is_finite() && max.is_finite() && min <= max) {
        return VmResult::panic(format!("latte::uniform: bad range {min}..{max}"));
    }
    let u = Stream::new(i).next_unit();
    VmResult::Ok(min + (max - min) * (1.0 - u))
}

/// A UUID value of scripts (`latte::uuid(i)`), bound to `uuid` and
/// `timeuuid` markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Any)]
#[rune(item = ::latte)]
pub struct Uuid(pub uuid::Uuid);

/// `latte::uuid(i)`: a version 4 shaped UUID, the same for the same `i`.
#[rune::function]
fn uuid(i: i64) -> Uuid {
    let mut s = Stream::new(i);
    let bits = (u128::from(s.next_u64()) << 64) | u128::from(s.next_u64());
    Uuid(uuid::Builder::from_random_bytes(bits.to_be_bytes()).into_uuid())
}

#[rune::function(instance, protocol = DISPLAY_FMT)]
fn uuid_display(this: &Uuid, f: &mut Formatter) -> VmResult<()> {
    rune::vm_write!(f, "{}", this.0)
}

/// `latte::param!("name", default)`: the value of `-P name=value`, or the
/// default expression. A value that reads as an integer, a float or a
/// boolean is that literal; anything else is a string (quotes around it, if
/// any, are dropped), so `-P keyspace=ks1` needs no shell quoting.
fn param(
    cx: &mut MacroContext<'_, '_, '_>,
    params: &HashMap<String, String>,
    stream: &TokenStream,
) -> rune::compile::Result<TokenStream> {
    let mut p = Parser::from_token_stream(stream, cx.input_span());
    let name = p.parse::<ast::LitStr>()?;
    let name = cx.resolve(name)?.to_string();
    p.parse::<ast::Comma>()?;
    let default = p.parse::<ast::Expr>()?;
    p.eof()?;
    let Some(value) = params.get(&name) else {
        return Ok(quote!(#default).into_token_stream(cx)?);
    };
    let value = value.trim();
    if let Ok(i) = value.parse::<i64>() {
        let lit = cx.lit(i)?;
        return Ok(quote!(#lit).into_token_stream(cx)?);
    }
    if let Ok(x) = value.parse::<f64>() {
        let lit = cx.lit(x)?;
        return Ok(quote!(#lit).into_token_stream(cx)?);
    }
    if value == "true" || value == "false" {
        let id = cx.insert_source(&name, value)?;
        let expr = cx.parse_source::<ast::Expr>(id)?;
        return Ok(quote!(#expr).into_token_stream(cx)?);
    }
    let unquoted = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value);
    let lit = cx.lit(unquoted)?;
    Ok(quote!(#lit).into_token_stream(cx)?)
}

/// The `latte` module, its `param!` macro reading `params` (`-P`).
pub fn module(params: Arc<HashMap<String, String>>) -> Result<Module, ContextError> {
    let mut m = Module::with_crate("latte")?;
    m.ty::<context::Context>()?;
    m.ty::<context::CqlError>()?;
    m.ty::<Uuid>()?;
    m.function_meta(context::execute)?;
    m.function_meta(context::prepare)?;
    m.function_meta(context::execute_prepared)?;
    m.function_meta(context::elapsed_secs)?;
    m.field_function(&rune::runtime::Protocol::SET, "load_cycle_count", context::set_load_cycle_count)?;
    m.field_function(&rune::runtime::Protocol::GET, "load_cycle_count", context::get_load_cycle_count)?;
    m.function_meta(context::cql_error_display)?;
    m.function_meta(uuid_display)?;
    m.function_meta(hash)?;
    m.function_meta(hash2)?;
    m.function_meta(hash_range)?;
    m.function_meta(blob)?;
    m.function_meta(text)?;
    m.function_meta(normal)?;
    m.function_meta(uniform)?;
    m.function_meta(uuid)?;
    m.macro_(["param"], move |cx, stream| param(cx, &params, stream))?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_deterministic_and_in_range() {
        for i in [-5_i64, 0, 1, 2, i64::MAX, i64::MIN] {
            assert!(hash_of(i) >= 0);
            assert_eq!(hash_of(i), hash_of(i));
        }
        assert_ne!(hash_of(1), hash_of(2));
    }

    #[test]
    fn streams_fill_lengths_and_alphabets() {
        let mut s = Stream::new(3);
        let u: Vec<f64> = (0..1000).map(|_| s.next_unit()).collect();
        assert!(u.iter().all(|x| *x > 0.0 && *x <= 1.0));
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
    }
}
