//! The fuzz corpus (fuzz/corpus) as a regression suite on stable: every input is read without a
//! panic, and its name says what it must come to (ok-, none-, err-, ack-).
//! Plus random inputs through the same parsers, for the cases nobody thought to write down.

use std::path::Path;

use hub_follower::claim::{parse_cluster, Endpoint};
use hub_follower::handoff::{Ack, Handoff};
use proptest::prelude::*;

fn corpus(kind: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(kind);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the {kind} corpus is missing");
    files
}

#[test]
fn the_claim_corpus_parses_as_its_names_say() {
    for (name, bytes) in corpus("claim") {
        let result = parse_cluster(&bytes);
        let ok = match name.split('-').next().unwrap() {
            "ok" => matches!(&result, Ok(Some(c)) if c.endpoint.as_str().starts_with("https://")),
            "none" => result == Ok(None),
            "err" => result.is_err(),
            // Inputs a fuzzer added (hash names): reading them without a panic is the test.
            _ => true,
        };
        assert!(ok, "{name}: {result:?}");
    }
}

#[test]
fn the_handoff_corpus_reads_as_its_names_say() {
    for (name, bytes) in corpus("handoff") {
        let handoff = Handoff::from_json(&bytes, Path::new(&name));
        let ack = serde_json::from_slice::<Ack>(&bytes);
        let ok = match name.split('-').next().unwrap() {
            "ok" => handoff.as_ref().is_ok_and(|h| {
                Handoff::from_json(h.to_json().as_bytes(), Path::new("again"))
                    .ok()
                    .as_ref()
                    == Some(h)
                    && h.basis.as_ref().is_none_or(|b| b.claim().is_ok())
            }),
            "err" => handoff.is_err(),
            "ack" => ack.is_ok(),
            _ => true,
        };
        assert!(ok, "{name}: {handoff:?}");
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        ".{0,40}".prop_map(serde_json::Value::from),
        "https://[a-z0-9.:\\[\\]@/?#]{0,30}".prop_map(serde_json::Value::from),
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(Z|[+-][0-9]{2}:[0-9]{2})?"
            .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("endpoint".to_string()),
                    Just("identity".to_string()),
                    Just("lastUpdated".to_string()),
                    "[a-z]{1,8}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_bytes_never_panic_the_claim_parser(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_cluster(&bytes);
    }

    #[test]
    fn any_active_controller_yields_a_canonical_endpoint_or_an_error(ac in json_value()) {
        let doc = serde_json::json!({"status": {"activeController": ac}});
        if let Ok(Some(claim)) = parse_cluster(doc.to_string().as_bytes()) {
            prop_assert!(claim.endpoint.as_str().starts_with("https://"));
            prop_assert_eq!(Endpoint::parse(claim.endpoint.as_str()).unwrap(), claim.endpoint);
        }
    }

    #[test]
    fn any_bytes_never_panic_the_handoff_reader(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Handoff::from_json(&bytes, Path::new("x"));
        let _ = serde_json::from_slice::<Ack>(&bytes);
    }
}
