//! One hub client against a real TLS server on loopback: every verdict and every failure mode.

mod support;

use std::time::{Duration, Instant};

use hub_follower::claim::Endpoint;
use hub_follower::config::HubConfig;
use hub_follower::hub::{HubClient, MAX_BODY};
use hub_follower::verdict::{ErrorReason, HubId, Verdict};
use support::fake_hub::{FakeHub, Fault};
use support::{CLUSTER, NAMESPACE};

const TIMEOUT: Duration = Duration::from_millis(800);

struct Fixture {
    hub: FakeHub,
    client: HubClient,
    dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let hub = FakeHub::start(NAMESPACE, CLUSTER, "tok-1").await;
    let dir = tempfile::tempdir().unwrap();
    let (token_file, ca_file) = hub.write_credentials(dir.path());
    let config = HubConfig {
        id: HubId::SECONDARY,
        endpoint: Endpoint::parse(&hub.endpoint()).unwrap(),
        raw_endpoint: hub.endpoint(),
        token_file,
        ca_file,
        tls_server_name: None,
    };
    let client = HubClient::new(config, NAMESPACE, CLUSTER, TIMEOUT);
    Fixture { hub, client, dir }
}

fn reason(v: &Verdict) -> Option<ErrorReason> {
    match v {
        Verdict::Error(e) => Some(e.reason),
        _ => None,
    }
}

#[tokio::test]
async fn a_published_claim_is_read_over_verified_tls_with_an_ip_san() {
    let mut f = fixture().await;
    f.hub.claim("https://10.1.80.12:6443/", "ctrl-b");
    let probe = f.client.probe().await;
    let Verdict::Claim(claim) = probe.verdict else {
        panic!("{:?}", probe.verdict)
    };
    assert_eq!(claim.endpoint.as_str(), "https://10.1.80.12:6443");
    assert_eq!(claim.identity.as_deref(), Some("ctrl-b"));
    assert!(claim.last_updated.is_some());
}

#[tokio::test]
async fn a_hub_that_publishes_nothing_is_no_claim() {
    let mut f = fixture().await;
    assert_eq!(f.client.probe().await.verdict, Verdict::NoClaim);
}

#[tokio::test]
async fn kubernetes_status_errors_map_to_their_reasons() {
    let mut f = fixture().await;
    for (code, expected) in [
        (403, ErrorReason::Forbidden),
        (404, ErrorReason::NotFound),
        (500, ErrorReason::Server),
        (429, ErrorReason::Server),
    ] {
        f.hub.set_fault(Fault::Status(code));
        let v = f.client.probe().await.verdict;
        assert_eq!(reason(&v), Some(expected), "{code}: {v:?}");
        if let Verdict::Error(e) = v {
            assert!(
                e.detail.contains(&format!("the fake hub answers {code}")),
                "{}",
                e.detail
            );
        }
    }
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized_and_a_rotated_token_is_picked_up() {
    let mut f = fixture().await;
    f.hub.state.lock().unwrap().token = "tok-2".into();
    assert_eq!(
        reason(&f.client.probe().await.verdict),
        Some(ErrorReason::Unauthorized)
    );
    std::fs::write(f.dir.path().join("token"), "tok-2\n").unwrap();
    assert_eq!(f.client.probe().await.verdict, Verdict::NoClaim);
}

#[tokio::test]
async fn missing_or_empty_credentials_are_credential_errors_naming_the_file() {
    let mut f = fixture().await;
    std::fs::write(f.dir.path().join("token"), " \n").unwrap();
    let v = f.client.probe().await.verdict;
    assert_eq!(reason(&v), Some(ErrorReason::Credentials));
    std::fs::remove_file(f.dir.path().join("token")).unwrap();
    let Verdict::Error(e) = f.client.probe().await.verdict else {
        panic!()
    };
    assert_eq!(e.reason, ErrorReason::Credentials);
    assert!(e.detail.contains("token"), "{}", e.detail);
    assert!(!e.detail.contains("tok-1"));
    // Projected tokens appear late: once the file is there, the hub has its say.
    std::fs::write(f.dir.path().join("token"), "tok-1").unwrap();
    assert_eq!(f.client.probe().await.verdict, Verdict::NoClaim);
}

#[tokio::test]
async fn tls_faults_are_tls_errors() {
    let mut f = fixture().await;
    for fault in [Fault::WrongCa, Fault::Expired, Fault::WrongSan] {
        f.hub.set_fault(fault.clone());
        // A new connection is needed to see a new certificate.
        f.hub.restart().await;
        let v = f.client.probe().await.verdict;
        assert_eq!(reason(&v), Some(ErrorReason::Tls), "{fault:?}: {v:?}");
    }
}

#[tokio::test]
async fn a_rotated_ca_file_is_used_without_a_restart() {
    let mut f = fixture().await;
    let other = support::fake_hub::Ca::new("unrelated");
    std::fs::write(f.dir.path().join("ca.crt"), &other.pem).unwrap();
    assert_eq!(
        reason(&f.client.probe().await.verdict),
        Some(ErrorReason::Tls)
    );
    std::fs::write(f.dir.path().join("ca.crt"), &f.hub.ca.pem).unwrap();
    assert_eq!(f.client.probe().await.verdict, Verdict::NoClaim);
}

#[tokio::test]
async fn hangs_and_stalls_cost_one_timeout_and_no_more() {
    let mut f = fixture().await;
    for fault in [Fault::HangAccept, Fault::Hang, Fault::StallBody] {
        f.hub.set_fault(fault.clone());
        f.hub.restart().await;
        let (reads, accepts) = (f.hub.requests(), f.hub.accepts());
        let started = Instant::now();
        let probe = f.client.probe().await;
        let took = started.elapsed();
        // Ended by --probe-timeout, whichever stage hung, and not sooner: the probe's own
        // deadline, or the client's connect timeout, which is set to the same and started
        // with it (a hung TLS handshake may meet either first). No other timeout (the
        // client's last resort) had a say.
        let Verdict::Error(e) = &probe.verdict else {
            panic!("{fault:?}: {:?}", probe.verdict)
        };
        assert_eq!(e.reason, ErrorReason::Timeout, "{fault:?}: {e:?}");
        assert!(
            e.detail == "no complete answer within 800ms"
                || (fault == Fault::HangAccept
                    && e.detail.ends_with("(Connect): deadline has elapsed")),
            "{fault:?}: {e:?}"
        );
        assert!(took >= TIMEOUT, "{fault:?} took {took:?}");
        // One attempt, not a retry after the deadline: one connection, and one request on
        // it (HangAccept never gets a request to count). What a hung hub costs beyond the
        // deadline is measured in benches/failover.rs.
        assert_eq!(f.hub.accepts() - accepts, 1, "{fault:?}");
        let expected = u64::from(fault != Fault::HangAccept);
        assert_eq!(f.hub.requests() - reads, expected, "{fault:?}");
    }
}

#[tokio::test]
async fn a_reset_or_a_stopped_hub_is_a_connect_error() {
    let mut f = fixture().await;
    f.hub.set_fault(Fault::Reset);
    assert_eq!(
        reason(&f.client.probe().await.verdict),
        Some(ErrorReason::Connect)
    );
    f.hub.set_fault(Fault::None);
    f.hub.stop();
    assert_eq!(
        reason(&f.client.probe().await.verdict),
        Some(ErrorReason::Connect)
    );
    f.hub.restart().await;
    assert_eq!(f.client.probe().await.verdict, Verdict::NoClaim);
}

#[tokio::test]
async fn bad_bodies_are_bad_responses() {
    let mut f = fixture().await;
    let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(MAX_BODY + 10));
    for body in [
        b"{not json".to_vec(),
        br#"{"status":{"activeController":{"endpoint":"https://10.0.0.1:6443","lastUpdated":"soon"}}}"#.to_vec(),
        br#"{"status":{"activeController":{"endpoint":["https://10.0.0.1:6443"]}}}"#.to_vec(),
        br#"{"status":{"activeController":"https://10.0.0.1:6443"}}"#.to_vec(),
        br#"{"status":{"activeController":{"endpoint":"not a url"}}}"#.to_vec(),
        huge.into_bytes(),
    ] {
        f.hub.set_fault(Fault::Body(body));
        assert_eq!(
            reason(&f.client.probe().await.verdict),
            Some(ErrorReason::BadResponse)
        );
    }
    // A date far ahead is read as it is: refusing it is the rule's job (`resolver`), tested
    // there and end to end in `a_claim_dated_far_ahead_is_a_bad_response_and_moves_nothing`.
    f.hub.set_fault(Fault::Body(
        br#"{"status":{"activeController":{"endpoint":"https://10.0.0.1:6443","lastUpdated":"2999-01-01T00:00:00Z"}}}"#.to_vec(),
    ));
    assert!(matches!(f.client.probe().await.verdict, Verdict::Claim(_)));
}

#[tokio::test]
async fn connections_are_reused_across_rounds() {
    let mut f = fixture().await;
    for _ in 0..5 {
        assert_eq!(f.client.probe().await.verdict, Verdict::NoClaim);
    }
    assert_eq!(f.hub.requests(), 5);
    assert_eq!(f.hub.handshakes(), 1);
}

#[tokio::test]
async fn tls_server_name_verifies_a_certificate_that_lacks_the_endpoint_ip() {
    let hub = FakeHub::start(NAMESPACE, CLUSTER, "tok-1").await;
    hub.set_fault(Fault::WrongSan); // certificate for 192.0.2.1 only
    let dir = tempfile::tempdir().unwrap();
    let (token_file, ca_file) = hub.write_credentials(dir.path());
    let mut config = HubConfig {
        id: HubId::PRIMARY,
        endpoint: Endpoint::parse(&hub.endpoint()).unwrap(),
        raw_endpoint: hub.endpoint(),
        token_file,
        ca_file,
        tls_server_name: None,
    };
    let mut plain = HubClient::new(config.clone(), NAMESPACE, CLUSTER, TIMEOUT);
    assert_eq!(reason(&plain.probe().await.verdict), Some(ErrorReason::Tls));
    config.tls_server_name = Some("192.0.2.1".into());
    let mut named = HubClient::new(config, NAMESPACE, CLUSTER, TIMEOUT);
    assert_eq!(named.probe().await.verdict, Verdict::NoClaim);
}

#[tokio::test]
async fn a_body_over_the_limit_without_a_length_is_refused_as_it_streams() {
    let mut f = fixture().await;
    f.hub.set_fault(Fault::HugeChunked(4 * MAX_BODY));
    let v = f.client.probe().await.verdict;
    assert_eq!(reason(&v), Some(ErrorReason::BadResponse), "{v:?}");
}

#[tokio::test]
async fn load_shedding_with_retry_after_is_not_hammered() {
    let mut f = fixture().await;
    f.hub.set_fault(Fault::StatusRetryAfter(429, 2));
    assert_eq!(
        reason(&f.client.probe().await.verdict),
        Some(ErrorReason::Server)
    );
    let before = f.hub.requests();
    for _ in 0..10 {
        let probe = f.client.probe().await;
        assert_eq!(reason(&probe.verdict), Some(ErrorReason::Server));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(f.hub.requests(), before, "asked again within Retry-After");
    f.hub.set_fault(Fault::None);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(f.client.probe().await.verdict, Verdict::NoClaim);
}
