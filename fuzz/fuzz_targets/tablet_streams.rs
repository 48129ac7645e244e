#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    shardwise_cdc::fuzzing::tablet_streams(data);
});
