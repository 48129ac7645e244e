//! The Kafka sink's properties-file parser. The fuzz crate cannot depend
//! on `shardwise-cdc-kafka` (its librdkafka would build from C sources
//! under the sanitizer), so it compiles the sink's own module file, on
//! nothing but `std` and `thiserror`: what is fuzzed is what ships.
#![no_main]

#[path = "../../cdc-kafka/src/brokers/properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::fuzz_properties(data));
