//! Builders the unit tests share.

use std::time::Duration;

use crate::config::{Cli, RestartConfig, RestartMode, Settings};
use crate::handoff::Handoff;
use crate::resolver::Reason;
use crate::verdict::HubId;

/// The settings the command line `hub-follower ARGS...` gives, env vars aside.
pub fn settings(args: &[&str]) -> Settings {
    use clap::Parser;
    let argv = std::iter::once("hub-follower").chain(args.iter().copied());
    Cli::try_parse_from(argv)
        .expect("test arguments parse")
        .settings
}

/// The restart settings at their defaults, in `mode`.
pub fn restart_config(mode: RestartMode) -> RestartConfig {
    let mut c = RestartConfig::from_settings(&settings(&[])).expect("defaults are valid");
    c.mode = mode;
    c
}

/// A published decision with placeholder paths.
pub fn handoff(hub: HubId, generation: u64, reason: Reason) -> Handoff {
    Handoff {
        hub,
        endpoint: format!("https://{hub}.example:6443"),
        token_file: "/t/token".into(),
        ca_file: "/t/ca.crt".into(),
        tls_server_name: None,
        identity: None,
        generation,
        decided_at: String::new(),
        reason,
        namespace: None,
        basis: None,
        steered_by: None,
        moved_at: None,
        silent_since: None,
    }
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
