//! Routing information of a request: the token of its partition key,
//! computed from the bound values of a prepared statement without touching
//! the heap (the values are serialized once more into a stack buffer, and
//! the key components hashed from there).

use shardwise_protocol::codec::Reader;
use shardwise_protocol::token::{PartitionKeyHasher, Partitioner, Token};
use shardwise_protocol::types::ser::SerializeValues;

/// Values up to this size are serialized on the stack for hashing.
const STACK: usize = 512;
/// Partition keys with more components than this are not routed.
const MAX_COMPONENTS: usize = 16;

/// The token of the partition key bound by `values`, given the bind-marker
/// indexes of the key's columns (in key order). `None` when the statement
/// binds no key, a key value is null or unset, or the values cannot be
/// serialized.
pub fn partition_token<V: SerializeValues + ?Sized>(
    pk_indexes: &[u16],
    values: &V,
    partitioner: Partitioner,
) -> Option<Token> {
    if pk_indexes.is_empty() || pk_indexes.len() > MAX_COMPONENTS || values.with_names() {
        return None;
    }
    let len = values.encoded_len().ok()?;
    let mut stack = [0u8; STACK];
    let mut heap = Vec::new();
    let buf: &mut [u8] = if len <= STACK {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    values.encode(&mut &mut buf[..]);
    let mut components: [Option<&[u8]>; MAX_COMPONENTS] = [None; MAX_COMPONENTS];
    let mut r = Reader::new(buf);
    for i in 0..values.count() {
        let value = r.value("bound value").ok()?.as_bytes();
        if let Some(pos) = pk_indexes.iter().position(|&p| usize::from(p) == i) {
            components[pos] = Some(value?);
        }
    }
    let components = &components[..pk_indexes.len()];
    if components.len() == 1 {
        return components[0].map(|key| partitioner.token_of_single(key));
    }
    let mut hasher = PartitionKeyHasher::new(partitioner);
    for c in components {
        hasher.push_component((*c)?).ok()?;
    }
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_composite_keys_hash_like_cassandra() {
        // Composite (143, 234) from the spec: token 4958784316840156970.
        let t = partition_token(&[1, 0], &(234i32, 143i32, "other"), Partitioner::Murmur3);
        assert_eq!(t.map(Token::value), Some(4958784316840156970));
        // Single key: the raw bytes of the value.
        let t = partition_token(&[0], &("test",), Partitioner::Murmur3);
        assert_eq!(t.map(Token::value), Some(-6017608668500074083));
        assert_eq!(partition_token(&[], &(1i32,), Partitioner::Murmur3), None);
        assert_eq!(partition_token(&[0], &(None::<i32>,), Partitioner::Murmur3), None);
        let big = "x".repeat(1000);
        assert!(partition_token(&[0], &(big.as_str(),), Partitioner::Murmur3).is_some());
    }
}
