#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| shardwise_emu::fuzzing::describe(data));
