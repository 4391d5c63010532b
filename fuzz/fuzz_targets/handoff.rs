#![no_main]
//! Whatever is in the handoff directory (a crash, a hand edit, a hostile writer of the ack):
//! reading it never panics, and what parses renders again.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = hub_follower::handoff::Handoff::from_json(data, std::path::Path::new("fuzz")) {
        let _ = h.to_env();
        let _ = h.to_kubeconfig();
        if let Some(b) = &h.basis {
            let _ = b.claim();
        }
        let again = hub_follower::handoff::Handoff::from_json(h.to_json().as_bytes(), std::path::Path::new("fuzz"));
        assert_eq!(again.ok().as_ref(), Some(&h));
    }
    let _ = serde_json::from_slice::<hub_follower::handoff::Ack>(data);
});
