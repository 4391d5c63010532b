#![no_main]
//! Any bytes a hub (or something pretending to be one) sends: never a panic, and a claim that
//! comes out always names a canonical https endpoint.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(claim)) = hub_follower::claim::parse_cluster(data) {
        let e = claim.endpoint.as_str();
        assert!(e.starts_with("https://"));
        assert_eq!(hub_follower::claim::Endpoint::parse(e).unwrap(), claim.endpoint);
    }
});
