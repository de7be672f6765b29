//! The hand-written structs must have the sizes the C compiler gives the header's structs, so a
//! field appended to gannet.h and not here fails. ctest points GANNET_ABI_SIZES at a C program
//! (tests/examples/abi_sizes.c) that prints them; without it this test has nothing to compare.
use std::mem::size_of;
use std::process::Command;

use gannet_sys::*;

#[test]
fn struct_sizes_match_the_c_header() {
    let Some(program) = std::env::var_os("GANNET_ABI_SIZES") else {
        eprintln!("GANNET_ABI_SIZES is not set: nothing to compare against");
        return;
    };
    let out = Command::new(&program)
        .output()
        .expect("run the abi_sizes program");
    assert!(out.status.success());
    let ours = [
        (
            "gannet_engine_config_t",
            size_of::<gannet_engine_config_t>(),
        ),
        ("gannet_model_info_t", size_of::<gannet_model_info_t>()),
        (
            "gannet_sampling_params_t",
            size_of::<gannet_sampling_params_t>(),
        ),
        ("gannet_chat_message_t", size_of::<gannet_chat_message_t>()),
        ("gannet_request_t", size_of::<gannet_request_t>()),
        ("gannet_event_t", size_of::<gannet_event_t>()),
        ("gannet_engine_stats_t", size_of::<gannet_engine_stats_t>()),
    ];
    let text = String::from_utf8(out.stdout).unwrap();
    let mut compared = 0;
    for line in text.lines() {
        let (name, size) = line.split_once(' ').expect("name size");
        let size: usize = size.parse().unwrap();
        let (_, mine) = ours
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} of gannet.h has no Rust mirror"));
        assert_eq!(*mine, size, "{name}: Rust {mine} bytes, C {size} bytes");
        compared += 1;
    }
    assert_eq!(compared, ours.len());
}
