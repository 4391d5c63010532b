//! Builders for the library's types, so tests state only what they are about.

use hub_follower::config::{Cli, RestartConfig, RestartMode, Settings};
use hub_follower::handoff::Handoff;
use hub_follower::resolver::Reason;
use hub_follower::verdict::HubId;

/// The settings the command line `hub-follower ARGS...` gives (env vars apply as they would).
pub fn settings(args: &[&str]) -> Settings {
    use clap::Parser;
    let argv = std::iter::once("hub-follower").chain(args.iter().copied());
    Cli::try_parse_from(argv).unwrap().settings
}

/// The restart settings at their defaults, in `mode`.
pub fn restart_config(mode: RestartMode) -> RestartConfig {
    let mut c = RestartConfig::from_settings(&settings(&[])).unwrap();
    c.mode = mode;
    c
}

/// A published decision for `hub`, with placeholder credential paths.
pub fn handoff(hub: HubId, generation: u64, reason: Reason) -> Handoff {
    Handoff {
        hub,
        endpoint: format!("https://{hub}.example:6443"),
        token_file: "/t/token".into(),
        ca_file: "/t/ca.crt".into(),
        tls_server_name: None,
        identity: None,
        generation,
        decided_at: "2026-12-02T10:00:00Z".into(),
        reason,
        namespace: None,
        basis: None,
        steered_by: None,
        moved_at: None,
        silent_since: None,
    }
}
