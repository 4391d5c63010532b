//! The docs stay true to the binary: every flag its `--help` shows is in docs/reference/settings.md
//! with its env var, and the page lists no flag the binary lacks.

use std::collections::BTreeSet;
use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hub-follower"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// (flag, env) for each option in clap's help text.
fn options(text: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("--") {
            let flag = format!(
                "--{}",
                rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .next()
                    .unwrap()
            );
            current = (flag != "--help" && flag != "--version").then_some(flag);
        }
        if let (Some(flag), Some(i)) = (&current, line.find("[env: ")) {
            let env = line[i + 6..].split(['=', ']']).next().unwrap().to_string();
            out.insert((flag.clone(), env));
            current = None;
        }
    }
    out
}

#[test]
fn the_settings_reference_lists_exactly_the_flags_the_binary_has() {
    let mut cli = options(&help(&[]));
    for sub in ["check", "exec"] {
        cli.extend(options(&help(&[sub])));
    }
    assert!(cli.len() > 20, "could not read the help text: {cli:?}");
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/reference/settings.md"
    ))
    .unwrap();
    // Each flag is a `### `--flag`` heading, with its variable on the next line of text.
    let mut documented = BTreeSet::new();
    let mut flag: Option<String> = None;
    for line in page.lines() {
        if let Some(f) = line.strip_prefix("### `").and_then(|l| l.strip_suffix('`')) {
            flag = Some(f.to_string());
        } else if let (Some(f), Some(env)) = (&flag, line.strip_prefix("env `")) {
            let env = env.split('`').next().unwrap_or_default();
            documented.insert((f.clone(), env.to_string()));
            flag = None;
        }
    }
    let missing: Vec<_> = cli.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&cli).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not documented: {missing:?}\ndocumented but not in the CLI: {extra:?}"
    );
}
