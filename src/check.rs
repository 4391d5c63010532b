//! `hub-follower check`: every hub probed once, what each says, and the decision a fresh start
//! would take. What an operator runs with `kubectl exec` when something looks wrong.

use serde::Serialize;

pub mod credential;

use crate::config::{Config, OutputFormat};
use crate::handoff;
use crate::hub::{probe_all, Access, ClaimField, HubClient};
use crate::resolver::Resolver;
use crate::state::HubView;
use crate::verdict::{HubId, Verdict};
use credential::Advice;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub hubs: Vec<HubReport>,
    /// The hub a fresh start would publish, and why.
    pub decision: Option<DecisionView>,
    /// What the handoff directory holds now, if anything.
    pub published: Option<handoff::Handoff>,
    /// Some hub answered.
    pub usable: bool,
    /// What is wrong beyond one hub, and how to fix it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<ReportProblem>,
}

#[derive(Debug, Serialize)]
pub struct ReportProblem {
    pub problem: &'static str,
    pub fix: String,
}

/// Every hub answered without a claim, and the published decision rests on none (or there is
/// none): nothing this sidecar could follow has ever been seen.
fn no_claim(
    config: &Config,
    probes: &[crate::hub::Probe],
    published: Option<&handoff::Handoff>,
) -> Option<ReportProblem> {
    let unclaimed = probes.iter().all(|p| matches!(p.verdict, Verdict::NoClaim));
    let rests_on_none = published.is_none_or(|h| h.basis.is_none());
    (config.hubs.len() >= 2 && unclaimed && rests_on_none).then(|| ReportProblem {
        problem: NO_CLAIM,
        fix: "no hub shows status.activeController, and the published decision rests on no claim. Either the controllers do not run in HA mode (no controller publishes the claim), or a hub's Cluster CRD does not declare status.activeController, so its API server drops the field: install the CRD that declares it. Until then the worker follows no failover.".into(),
    })
}

#[derive(Debug, Serialize)]
pub struct HubReport {
    pub hub: HubId,
    #[serde(flatten)]
    pub view: HubView,
    /// What is wrong with this hub's credential or registration, and how to fix it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<Advice>,
    /// Whether the hub's Cluster CRD declares `status.activeController` (`declared`,
    /// `not_declared`, `unknown`), for a hub that answered.
    #[serde(rename = "claimField", skip_serializing_if = "Option::is_none")]
    pub claim_field: Option<&'static str>,
    /// What the hub lets this hub's credential (the worker's own on the primary, the one the
    /// worker is handed on any other) do with the worker's `Cluster`, for a hub that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// Why the hub would not say what the credential may do.
    #[serde(rename = "accessUnknown", skip_serializing_if = "Option::is_none")]
    pub access_unknown: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct DecisionView {
    pub hub: HubId,
    pub endpoint: String,
    pub reason: &'static str,
}

pub async fn run(config: &Config) -> Report {
    let mut clients = HubClient::for_config(config);
    let mut probes = probe_all(&mut clients).await;
    // For each hub that answered, whether its CRD keeps the claim at all, and what its
    // credential may do with the claim's object.
    let mut fields = Vec::new();
    let mut accesses = Vec::new();
    for (client, probe) in clients.iter_mut().zip(&probes) {
        let (field, access) = match probe.verdict.answered() {
            true => (
                Some(client.claim_field().await),
                Some(client.access(&config.namespace, &config.cluster_name).await),
            ),
            false => (None, None),
        };
        fields.push((probe.hub, field));
        accesses.push((probe.hub, access));
    }
    let now = jiff::Timestamp::now();
    let mut resolver = Resolver::new(config.endpoints(), config.confirmations);
    let verdicts: Vec<(HubId, &Verdict)> = probes.iter().map(|p| (p.hub, &p.verdict)).collect();
    let step = resolver.observe(now, &verdicts);
    for p in &mut probes {
        if let Some(e) = step.refused(p.hub) {
            p.verdict = Verdict::Error(e.clone());
        }
    }
    let decision = step.decision.and_then(|d| {
        config.hub(d.hub).map(|h| DecisionView {
            hub: d.hub,
            endpoint: h.raw_endpoint.clone(),
            reason: d.reason.as_str(),
        })
    });
    let mut hubs = Vec::new();
    for p in &probes {
        let Some(h) = config.hub(p.hub) else {
            continue;
        };
        let credential = match &p.verdict {
            Verdict::Error(e) => {
                // Only the token's expiry is read from it.
                let token = tokio::fs::read_to_string(&h.token_file).await.ok();
                credential::advise(
                    h,
                    e,
                    &config.cluster_name,
                    &config.namespace,
                    token.as_deref(),
                    now,
                )
            }
            _ => None,
        };
        let field = fields
            .iter()
            .find(|(hub, _)| *hub == p.hub)
            .and_then(|(_, f)| f.clone());
        let access = accesses
            .iter()
            .find(|(hub, _)| *hub == p.hub)
            .and_then(|(_, a)| a.as_ref());
        hubs.push(HubReport {
            hub: p.hub,
            view: HubView::new(&h.raw_endpoint, p, now, None),
            credential,
            claim_field: field.as_ref().map(ClaimField::as_str),
            access: access.and_then(|a| a.as_ref().ok()).copied(),
            access_unknown: access
                .and_then(|a| a.as_ref().err())
                .map(|e| e.detail.clone()),
        });
    }
    let mut problems: Vec<ReportProblem> = fields
        .iter()
        .filter(|(_, f)| *f == Some(ClaimField::NotDeclared))
        .map(|(hub, _)| ReportProblem {
            problem: CRD_DROPS_CLAIM,
            fix: format!("the {hub} hub's Cluster CRD (clusters.controller.kubeslice.io) does not declare status.activeController, so its API server drops the claim from every write, and no read or watch can show it: install the CRD that declares it."),
        })
        .collect();
    if config.watch_timeout.is_some() {
        problems.extend(hubs.iter().filter_map(|h| {
            watch_forbidden(h.hub, h.access?, &config.cluster_name, &config.namespace)
        }));
    }
    let published = handoff::read(&config.handoff_dir).ok().flatten();
    problems.extend(no_claim(config, &probes, published.as_ref()));
    Report {
        hubs,
        decision,
        published,
        usable: probes.iter().any(|p| p.verdict.answered()),
        problems,
    }
}

/// A hub whose credential may read the claim but not watch it: the watch fails, and only the
/// reads follow a failover.
fn watch_forbidden(
    hub: HubId,
    access: Access,
    cluster: &str,
    namespace: &str,
) -> Option<ReportProblem> {
    let denied: Vec<&str> = access
        .denied()
        .into_iter()
        .filter(|verb| *verb != "get")
        .collect();
    (access.get && !denied.is_empty()).then(|| ReportProblem {
        problem: WATCH_FORBIDDEN,
        fix: format!(
            "the {hub} hub lets its credential get the Cluster {cluster} but not {verbs} it, so the watch fails (HubFollowerWatchDown) and only the reads, every --poll-interval, see a failover. Grant get, list and watch on clusters.controller.kubeslice.io {cluster} in {namespace} to that credential on that hub, or set --watch=false.",
            verbs = denied.join(" or "),
        ),
    })
}

/// The problems beyond one hub's credential that `check` reports.
const CRD_DROPS_CLAIM: &str = "crd_drops_claim";
const NO_CLAIM: &str = "no_claim";
const WATCH_FORBIDDEN: &str = "watch_forbidden";
#[cfg(test)]
const REPORT_PROBLEMS: [&str; 3] = [CRD_DROPS_CLAIM, NO_CLAIM, WATCH_FORBIDDEN];

/// Where each problem word `check` prints is explained: one section per word, whose anchor is
/// the word itself.
pub const TROUBLESHOOTING: &str =
    "https://github.com/kubeslice/hub-follower/blob/main/docs/troubleshooting.md";

/// The link `check` prints under a problem.
pub fn see(problem: &str) -> String {
    format!("{TROUBLESHOOTING}#{problem}")
}

pub fn render(report: &Report, format: OutputFormat) -> String {
    match format {
        OutputFormat::Json => serde_json::to_string_pretty(report).unwrap_or_default() + "\n",
        OutputFormat::Text => {
            let mut out = String::new();
            let width = report
                .hubs
                .iter()
                .map(|h| h.hub.as_str().len())
                .max()
                .unwrap_or(0)
                .max(9);
            for h in &report.hubs {
                let v = &h.view;
                let what = match (&v.claim, v.reason) {
                    (Some(c), _) => format!(
                        "claim endpoint={} identity={} lastUpdated={}{}",
                        c.endpoint,
                        c.identity.as_deref().unwrap_or("-"),
                        c.last_updated.as_deref().unwrap_or("-"),
                        c.epoch.map_or(String::new(), |e| format!(" epoch={e}"))
                    ),
                    (None, Some(r)) => format!("error {r}: {}", v.detail.as_deref().unwrap_or("")),
                    (None, None) => "no claim (answered; publishes nothing)".to_string(),
                };
                out.push_str(&format!(
                    "{:<width$} {:<32} {:>8.1}ms  {what}\n",
                    h.hub.as_str(),
                    v.endpoint,
                    v.latency_ms
                ));
                if let Some(a) = &h.credential {
                    out.push_str(&format!(
                        "{:<width$} {}: {}\n{:<width$} see {}\n",
                        "",
                        a.problem.as_str(),
                        a.fix,
                        "",
                        see(a.problem.as_str())
                    ));
                }
            }
            match &report.decision {
                Some(d) => out.push_str(&format!(
                    "decision: {} {} ({})\n",
                    d.hub, d.endpoint, d.reason
                )),
                None => out.push_str("decision: none\n"),
            }
            match &report.published {
                Some(p) => out.push_str(&format!(
                    "published: {} {} (generation {}, {})\n",
                    p.hub,
                    p.endpoint,
                    p.generation,
                    p.reason.as_str()
                )),
                None => out.push_str("published: nothing in the handoff directory\n"),
            }
            if !report.usable {
                out.push_str("no hub answered\n");
            }
            for p in &report.problems {
                out.push_str(&format!(
                    "{}: {}\n  see {}\n",
                    p.problem,
                    p.fix,
                    see(p.problem)
                ));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::credential::Problem;
    use super::{watch_forbidden, Access, HubId, REPORT_PROBLEMS, WATCH_FORBIDDEN};

    #[test]
    fn a_credential_that_may_read_but_not_watch_the_claim_is_a_problem_naming_what_to_grant() {
        let all = Access {
            get: true,
            list: true,
            watch: true,
        };
        assert!(watch_forbidden(HubId::SECONDARY, all, "worker-1", "kubeslice-acme").is_none());
        let no_watch = Access {
            watch: false,
            ..all
        };
        let p = watch_forbidden(HubId::SECONDARY, no_watch, "worker-1", "kubeslice-acme")
            .expect("a problem");
        assert_eq!(p.problem, WATCH_FORBIDDEN);
        for part in [
            "the secondary hub",
            "not watch it",
            "worker-1 in kubeslice-acme",
            "--watch=false",
        ] {
            assert!(p.fix.contains(part), "{part:?} not in {:?}", p.fix);
        }
        let read_only = Access {
            list: false,
            ..no_watch
        };
        let p = watch_forbidden(HubId::PRIMARY, read_only, "w", "ns").expect("a problem");
        assert!(p.fix.contains("not list or watch it"), "{}", p.fix);
        // A credential that may not even get the object is the probe's `forbidden`.
        let none = Access {
            get: false,
            ..read_only
        };
        assert!(watch_forbidden(HubId::PRIMARY, none, "w", "ns").is_none());
    }

    /// Every problem word `check` prints links to a section of docs/troubleshooting.md whose
    /// anchor is that word.
    #[test]
    fn every_problem_check_prints_has_its_troubleshooting_section() {
        let page = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/troubleshooting.md"
        ))
        .expect("docs/troubleshooting.md");
        let words = Problem::ALL
            .map(Problem::as_str)
            .into_iter()
            .chain(REPORT_PROBLEMS);
        for word in words {
            assert!(
                page.lines().any(|l| l == format!("## `{word}`")),
                "no `## `{word}`` section in docs/troubleshooting.md"
            );
            assert!(super::see(word).ends_with(&format!("docs/troubleshooting.md#{word}")));
        }
    }
}
