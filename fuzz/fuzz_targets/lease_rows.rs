#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    shardwise_cdc::fuzzing::lease_rows(data);
});
