//! `hub-follower check`: every hub probed once, what each says, and the decision a fresh start
//! would take. What an operator runs with `kubectl exec` when something looks wrong.

use serde::Serialize;

pub mod credential;

use crate::config::{Config, OutputFormat};
use crate::handoff;
use crate::hub::{probe_all, HubClient};
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
}

#[derive(Debug, Serialize)]
pub struct HubReport {
    pub hub: HubId,
    #[serde(flatten)]
    pub view: HubView,
    /// What is wrong with this hub's credential or registration, and how to fix it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<Advice>,
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
        hubs.push(HubReport {
            hub: p.hub,
            view: HubView::new(&h.raw_endpoint, p, now, None),
            credential,
        });
    }
    Report {
        hubs,
        decision,
        published: handoff::read(&config.handoff_dir).ok().flatten(),
        usable: probes.iter().any(|p| p.verdict.answered()),
    }
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
                        "{:<width$} {}: {}\n",
                        "",
                        a.problem.as_str(),
                        a.fix
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
            out
        }
    }
}
