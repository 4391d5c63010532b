//! The docs stay true to the binary: every flag the CLI has is in docs/configuration.md with its
//! env var, and the page lists no flag the CLI lacks.

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
fn configuration_md_lists_exactly_the_cli_flags_with_their_env_vars() {
    let mut cli = options(&help(&[]));
    for sub in ["check", "exec"] {
        cli.extend(options(&help(&[sub])));
    }
    assert!(cli.len() > 20, "could not read the help text: {cli:?}");
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .unwrap();
    let mut in_table = false;
    let mut documented = BTreeSet::new();
    for line in page.lines() {
        if line.trim() == "| flag | env | default | validation |" {
            in_table = true;
            continue;
        }
        if in_table {
            if !line.starts_with('|') {
                break;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells[1].starts_with("`--") {
                documented.insert((
                    cells[1].trim_matches('`').to_string(),
                    cells[2].trim_matches('`').to_string(),
                ));
            }
        }
    }
    let missing: Vec<_> = cli.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&cli).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not documented: {missing:?}\ndocumented but not in the CLI: {extra:?}"
    );
}
