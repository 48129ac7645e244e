#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::emu::cdclog::fuzzing::dml(data));
