//! The tokens never leave their files: not in logs at any level, not in /status or /metrics,
//! not in the handoff files, not in `check`'s output or its error messages.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{Hubs, Sidecar};

const TOKENS: [&str; 2] = ["primary-token-a1b2", "secondary-token-c3d4"];

fn assert_clean(what: &str, text: &str) {
    for token in TOKENS {
        assert!(!text.contains(token), "{what} contains a token");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_token_appears_in_any_output_through_a_whole_failover() {
    let mut hubs = Hubs::start().await;
    hubs.both_claim(&hubs.primary, "ctrl-a");
    let mut args = hubs.args("200ms", "150ms", 2);
    args.retain(|a| !a.starts_with("--watch"));
    args.push("--watch=true".into());
    // Every level of every crate, the HTTP and TLS libraries included.
    let s = Sidecar::spawn_with_env(&args, &hubs.handoff_dir(), &[("RUST_LOG", "trace")]);
    s.wait_until("startup", Duration::from_secs(10), |s| {
        s.handoff().is_some()
    });
    // A rejected token (its error message) and a failover.
    hubs.secondary.state.lock().unwrap().token = "rotated-elsewhere".into();
    std::thread::sleep(Duration::from_millis(600));
    hubs.secondary.state.lock().unwrap().token = TOKENS[1].into();
    hubs.primary.stop();
    hubs.secondary.claim(&hubs.secondary.endpoint(), "ctrl-b");
    s.wait_until("the switch", Duration::from_secs(10), |s| {
        s.handoff().is_some_and(|h| h["hub"] == "secondary")
    });

    let logs = s.logs();
    assert!(
        logs.lines().count() > 100 && logs.contains("TRACE"),
        "trace logging was not on"
    );
    assert_clean("the logs", &logs);
    assert_clean("/status", &s.get("/status").1);
    assert_clean("/metrics", &s.get("/metrics").1);
    for entry in std::fs::read_dir(hubs.handoff_dir()).unwrap().flatten() {
        if entry.path().is_file() {
            assert_clean(
                &entry.path().display().to_string(),
                &std::fs::read_to_string(entry.path()).unwrap(),
            );
        }
    }
    for file in ["active-hub.json", "active-hub.env", "kubeconfig"] {
        assert_clean(
            file,
            &std::fs::read_to_string(hubs.handoff_dir().join(file)).unwrap(),
        );
    }
    for output in ["text", "json"] {
        let out = Command::new(support::binary())
            .arg("check")
            .args(hubs.args("1s", "500ms", 2))
            .arg(format!("--output={output}"))
            .env("RUST_LOG", "trace")
            .output()
            .unwrap();
        assert_clean("check's output", &String::from_utf8_lossy(&out.stdout));
        assert_clean("check's errors", &String::from_utf8_lossy(&out.stderr));
    }
}
