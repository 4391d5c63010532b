//! The decision as files the worker reads, published atomically as a set.
//!
//! Layout, the way kubelet updates a ConfigMap volume:
//! ```text
//! ..data -> ..7_1764669600123456789       (swapped with one rename)
//! ..7_1764669600123456789/active-hub.json (one folder per decision, fsynced before the swap)
//! active-hub.json -> ..data/active-hub.json
//! active-hub.env  -> ..data/active-hub.env
//! kubeconfig      -> ..data/kubeconfig
//! ```
//! A reader that opens a top-level name resolves `..data` once, so it sees one whole decision,
//! never parts of two. Only paths to credentials are written, never a credential.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::claim::{Claim, Endpoint};
use crate::resolver::Reason;
use crate::verdict::HubId;

pub const JSON_FILE: &str = "active-hub.json";
pub const ENV_FILE: &str = "active-hub.env";
pub const KUBECONFIG_FILE: &str = "kubeconfig";
pub const ACK_FILE: &str = "worker-ack.json";
pub const RESTART_REQUEST_FILE: &str = "restart-request.json";
pub const MOVE_REQUEST_FILE: &str = "move-request.json";
pub const UNKILLABLE_FILE: &str = "worker-unkillable.json";
const DATA_LINK: &str = "..data";
const FILES: [&str; 3] = [JSON_FILE, ENV_FILE, KUBECONFIG_FILE];

/// The largest generation a handoff may carry: 2^53 − 1, exact in every JSON reader, and
/// unreachable one decision at a time. The handoff folder is shared with the worker's
/// container, so a larger one is refused: counting on from it would wrap, and the wrapper
/// would take every later decision for an older one.
pub const MAX_GENERATION: u64 = (1 << 53) - 1;

/// The published decision: `active-hub.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    pub hub: HubId,
    pub endpoint: String,
    pub token_file: PathBuf,
    pub ca_file: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    #[serde(default)]
    pub identity: Option<String>,
    /// Goes up by one for each published decision, across sidecar restarts.
    pub generation: u64,
    /// RFC 3339.
    pub decided_at: String,
    pub reason: Reason,
    /// The namespace the kubeconfig's context defaults to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The claim the decision rests on, kept so that a restarted sidecar never moves the worker
    /// to an older one. Absent for a default decision, and in handoffs written before it was
    /// kept; such a decision takes the first claim naming its hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
    /// The operator's pin or drain that made this decision, if one did. For people: the
    /// restart side treats the decision like any other.
    #[serde(rename = "override", default, skip_serializing_if = "Option::is_none")]
    pub steered_by: Option<SteeredBy>,
    /// RFC 3339: when the claims last moved the worker (a switch no pin or drain made), so
    /// that a restarted sidecar, however many times it restarts, keeps the split-brain window
    /// (rule 11). Absent before the first such move, and in handoffs written before it was
    /// kept; `decidedAt` of a `switch` stands in then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_at: Option<String>,
    /// RFC 3339: since when the decision's hub has not answered, while it does not; so that
    /// a restarted sidecar, however many times it restarts, counts `--dead-hub-after` from
    /// there (rule 10), not from its own start. Absent while the hub answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silent_since: Option<String>,
}

/// `override` in `active-hub.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SteeredBy {
    /// `pin` or `drain`.
    pub kind: String,
    pub hub: String,
    /// RFC 3339.
    pub until: String,
}

/// `basis` in `active-hub.json`: a claim as the hub published it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Basis {
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

impl Basis {
    pub fn of(claim: &Claim) -> Self {
        Self {
            endpoint: claim.endpoint.to_string(),
            identity: claim.identity.clone(),
            last_updated: claim.last_updated.map(|t| t.to_string()),
            epoch: claim.epoch,
        }
    }

    /// The claim again, or what in it cannot be read, naming the field.
    pub fn claim(&self) -> Result<Claim, String> {
        let endpoint =
            Endpoint::parse(&self.endpoint).map_err(|e| format!("basis.endpoint {e}"))?;
        let last_updated = self
            .last_updated
            .as_deref()
            .map(|t| {
                t.parse()
                    .map_err(|e| format!("basis.lastUpdated is not an RFC 3339 time: {e}"))
            })
            .transpose()?;
        Ok(Claim {
            endpoint,
            identity: self.identity.clone(),
            last_updated,
            epoch: self.epoch,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not a handoff file: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("cannot publish into {dir}: {step}: {source}")]
    Write {
        dir: PathBuf,
        step: &'static str,
        source: io::Error,
    },
}

impl Handoff {
    pub fn to_json(&self) -> String {
        // Serializing plain strings and numbers cannot fail; fall back to "{}" rather than panic.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into()) + "\n"
    }

    pub fn from_json(bytes: &[u8], path: &Path) -> Result<Self, HandoffError> {
        let format = |reason: String| HandoffError::Format {
            path: path.to_path_buf(),
            reason,
        };
        let handoff: Self = serde_json::from_slice(bytes).map_err(|e| format(e.to_string()))?;
        if handoff.generation > MAX_GENERATION {
            return Err(format(format!(
                "generation: expected at most {MAX_GENERATION}, found {}",
                handoff.generation
            )));
        }
        Ok(handoff)
    }

    /// `active-hub.env`: `KEY='value'` lines that `sh` can source whatever the paths contain.
    pub fn to_env(&self) -> String {
        let mut out = String::new();
        for (key, value) in [
            ("HUB_HOST_ENDPOINT", self.endpoint.as_str()),
            ("HUB_TOKEN_FILE", &self.token_file.to_string_lossy()),
            ("HUB_CA_FILE", &self.ca_file.to_string_lossy()),
        ] {
            out.push_str(key);
            out.push('=');
            out.push_str(&sh_quote(value));
            out.push('\n');
        }
        out
    }

    /// The environment a worker should start with, as pairs.
    pub fn env_pairs(&self) -> [(&'static str, String); 3] {
        [
            ("HUB_HOST_ENDPOINT", self.endpoint.clone()),
            (
                "HUB_TOKEN_FILE",
                self.token_file.to_string_lossy().into_owned(),
            ),
            ("HUB_CA_FILE", self.ca_file.to_string_lossy().into_owned()),
        ]
    }

    /// A kubeconfig that points at the credential files (not their contents), so token rotation
    /// keeps working for whoever uses it. Scalars are JSON-quoted, which YAML reads as-is.
    pub fn to_kubeconfig(&self) -> String {
        let q = |s: &str| serde_json::Value::from(s).to_string();
        let name = q(self.hub.as_str());
        let mut cluster = format!(
            "    server: {}\n    certificate-authority: {}\n",
            q(&self.endpoint),
            q(&self.ca_file.to_string_lossy())
        );
        if let Some(sni) = &self.tls_server_name {
            cluster.push_str(&format!("    tls-server-name: {}\n", q(sni)));
        }
        let namespace = self
            .namespace
            .as_deref()
            .map(|ns| format!("    namespace: {}\n", q(ns)))
            .unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n{cluster}\
             users:\n- name: \"hub-follower\"\n  user:\n    tokenFile: {token}\n\
             contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: \"hub-follower\"\n{namespace}\
             current-context: {name}\n",
            token = q(&self.token_file.to_string_lossy()),
        )
    }
}

fn sh_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `worker-ack.json`: written by `hub-follower exec` just before it becomes the worker, so the
/// sidecar knows which decision the running worker started on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ack {
    pub generation: u64,
    pub pid: u32,
    /// RFC 3339.
    pub started_at: String,
    #[serde(default)]
    pub hub: Option<HubId>,
}

/// Writes the acknowledgement in one rename, so the sidecar never reads half of one.
pub fn write_ack(dir: &Path, ack: &Ack) -> io::Result<()> {
    replace_json(dir, ACK_FILE, ack)
}

/// The worker's acknowledgement, if there is a readable one.
pub fn read_ack(dir: &Path) -> Option<Ack> {
    read_json(dir, ACK_FILE)
}

/// `restart-request.json`: written by the sidecar in restart-all mode just before it exits with
/// the restart code, so that the sidecar kubelet starts next knows the worker is being restarted
/// onto the published decision (and does not act again), and when the last restart was asked
/// for (the cooldown outlives the process).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartRequest {
    /// The decision the restart was for.
    pub generation: u64,
    pub hub: HubId,
    /// RFC 3339.
    pub requested_at: String,
    pub exit_code: u8,
}

/// Writes the restart request in one rename, synced, so the next sidecar reads all of it or the
/// one before. Once the rename is done the request is there: a failed sync of the directory
/// after it is only reported, since the sidecar must then exit as the request says.
pub fn write_restart_request(dir: &Path, request: &RestartRequest) -> io::Result<()> {
    replace_json(dir, RESTART_REQUEST_FILE, request)?;
    if let Err(e) = sync_dir(dir) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot sync the handoff folder after writing the restart request");
    }
    Ok(())
}

/// `move-request.json`: written by the sidecar in in-place mode when it moves the worker; the
/// exec wrapper (`--in-place`) restarts the worker onto the decision published now when the
/// request names a generation newer than the worker's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveRequest {
    /// The decision the move is for.
    pub generation: u64,
    pub hub: HubId,
    /// RFC 3339.
    pub requested_at: String,
}

/// Writes the move request in one rename, so the wrapper reads all of it or the one before.
pub fn write_move_request(dir: &Path, request: &MoveRequest) -> io::Result<()> {
    replace_json(dir, MOVE_REQUEST_FILE, request)
}

/// The last move request, if there is a readable one.
pub fn read_move_request(dir: &Path) -> Option<MoveRequest> {
    read_json(dir, MOVE_REQUEST_FILE)
}

/// `worker-unkillable.json`: written by `hub-follower exec --in-place` just before it exits
/// with code 75, because the worker it was moving was still there after its SIGKILL. The
/// sidecar takes it (reads and removes it) to count and record it: the wrapper's own words go
/// only to the worker container's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unkillable {
    pub pid: u32,
    /// The decision the stuck worker was started on.
    pub generation: u64,
    pub hub: HubId,
    /// RFC 3339: when the wrapper gave up.
    pub at: String,
}

/// Writes the wrapper's last words in one rename.
pub fn write_unkillable(dir: &Path, unkillable: &Unkillable) -> io::Result<()> {
    replace_json(dir, UNKILLABLE_FILE, unkillable)
}

/// The wrapper's last words, once: read and removed. A file that cannot be parsed still counts
/// (`Some(None)`): the wrapper wrote it, so a worker outlived its SIGKILL. A file that cannot be
/// removed is taken again next time: counted twice rather than never.
pub fn take_unkillable(dir: &Path) -> Option<Option<Unkillable>> {
    let path = dir.join(UNKILLABLE_FILE);
    let bytes = fs::read(&path).ok()?;
    if let Err(e) = fs::remove_file(&path) {
        tracing::warn!(file = %path.display(), error = %e, "cannot remove the exec wrapper's report of an unkillable worker; it will be counted again");
    }
    Some(serde_json::from_slice(&bytes).ok())
}

/// `restart-request.json` as found: the request, when it can be read, and when the file was
/// last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFile {
    pub request: Option<RestartRequest>,
    pub modified: Option<std::time::SystemTime>,
}

/// The last restart request's file, if there is one. One that can't be read or parsed is
/// reported and still returned, without its request: a request is on file, and taking it as
/// none would let the next sidecar exit again for a restart already under way.
pub fn read_restart_request(dir: &Path) -> Option<RequestFile> {
    let path = dir.join(RESTART_REQUEST_FILE);
    let modified = fs::metadata(&path).and_then(|m| m.modified()).ok();
    let request = match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .inspect_err(|e| tracing::warn!(path = %path.display(), error = %e, "the last restart request is not valid"))
            .ok(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the last restart request");
            None
        }
    };
    Some(RequestFile { request, modified })
}

/// The decision currently published in `dir`, if any.
pub fn read(dir: &Path) -> Result<Option<Handoff>, HandoffError> {
    let path = dir.join(JSON_FILE);
    match fs::read(&path) {
        Ok(bytes) => Handoff::from_json(&bytes, &path).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HandoffError::Read { path, source }),
    }
}

/// Publishes `handoff` in `dir` as one atomic change. On error the previous decision stays
/// visible and whole; what was half-written is cleaned up by the next publish.
pub fn publish(dir: &Path, handoff: &Handoff) -> Result<(), HandoffError> {
    let fail = |step: &'static str| {
        move |source: io::Error| HandoffError::Write {
            dir: dir.to_path_buf(),
            step,
            source,
        }
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let version = format!("..{}_{}", handoff.generation, nanos);
    let version_dir = dir.join(&version);
    fs::create_dir(&version_dir).map_err(fail("create a version folder"))?;
    fs::set_permissions(&version_dir, fs::Permissions::from_mode(0o755))
        .map_err(fail("set the version folder's mode"))?;
    for (name, content) in [
        (JSON_FILE, handoff.to_json()),
        (ENV_FILE, handoff.to_env()),
        (KUBECONFIG_FILE, handoff.to_kubeconfig()),
    ] {
        write_synced(&version_dir.join(name), content.as_bytes()).map_err(fail("write a file"))?;
    }
    sync_dir(&version_dir).map_err(fail("sync the version folder"))?;

    replace_symlink(dir, DATA_LINK, Path::new(&version)).map_err(fail("swap ..data"))?;
    for name in FILES {
        let target = Path::new(DATA_LINK).join(name);
        if fs::read_link(dir.join(name)).ok().as_deref() != Some(target.as_path()) {
            replace_symlink(dir, name, &target).map_err(fail("link a file name"))?;
        }
    }
    sync_dir(dir).map_err(fail("sync the handoff folder"))?;
    prune(dir, &version);
    Ok(())
}

/// [`publish`] on tokio's blocking pool: its writes and fsyncs would otherwise stall the
/// runtime's one thread, which the HTTP server and the restart side share with the poll loop.
/// The write runs to its end even if the caller stops waiting.
pub async fn publish_in_background(dir: &Path, handoff: &Handoff) -> Result<(), HandoffError> {
    let (dir, handoff) = (dir.to_path_buf(), handoff.clone());
    let failed = dir.clone();
    tokio::task::spawn_blocking(move || publish(&dir, &handoff))
        .await
        .unwrap_or_else(|e| {
            Err(HandoffError::Write {
                dir: failed,
                step: "run the write",
                source: io::Error::other(e),
            })
        })
}

/// [`read`] on tokio's blocking pool.
pub async fn read_in_background(dir: &Path) -> Result<Option<Handoff>, HandoffError> {
    let dir = dir.to_path_buf();
    let path = dir.join(JSON_FILE);
    tokio::task::spawn_blocking(move || read(&dir))
        .await
        .unwrap_or_else(|e| {
            Err(HandoffError::Read {
                path,
                source: io::Error::other(e),
            })
        })
}

/// The highest generation among the version folders in `dir`, for when `active-hub.json` can't
/// be read: generations must keep going up across sidecar restarts, whatever happened to it.
pub fn generation_on_disk(dir: &Path) -> Option<u64> {
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let rest = name.to_str()?.strip_prefix("..")?;
            rest.split_once('_')?.0.parse::<u64>().ok()
        })
        .filter(|g| *g <= MAX_GENERATION)
        .max()
}

/// Checks at startup that `dir` exists (or can be made) and takes writes, so that a bad mount is
/// a configuration error and not a silent failure at the first switch.
pub fn ensure_writable(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    fs::write(&probe, b"")?;
    fs::remove_file(&probe)
}

/// Replaces `dir/name` with `value` as JSON in one rename, the new file synced first: a reader
/// finds all of it or the one before. The temporary file (`.NAME.PID.partial`) is named like no
/// version folder or temporary link, so `prune` leaves it alone.
fn replace_json(dir: &Path, name: &str, value: &impl Serialize) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.{}.partial", std::process::id()));
    let json = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    write_synced(&tmp, &json)?;
    fs::rename(&tmp, dir.join(name))
}

/// `dir/name` as JSON, if it can be read and parsed.
fn read_json<T: serde::de::DeserializeOwned>(dir: &Path, name: &str) -> Option<T> {
    serde_json::from_slice(&fs::read(dir.join(name)).ok()?).ok()
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(bytes)?;
    f.set_permissions(fs::Permissions::from_mode(0o644))?;
    f.sync_all()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Points `dir/name` at `target` with one rename over the old link.
fn replace_symlink(dir: &Path, name: &str, target: &Path) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp-{}", std::process::id()));
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    symlink(target, &tmp)?;
    fs::rename(&tmp, dir.join(name))
}

/// Removes every version folder but `keep`, and temporary links left by a crash. Failures are
/// harmless (the next publish tries again), so they are only logged.
fn prune(dir: &Path, keep: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let stale_version = name.starts_with("..") && name != DATA_LINK && name != keep;
        let stale_link = name.contains(".tmp-");
        if !(stale_version || stale_link) {
            continue;
        }
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(t) if t.is_dir() => fs::remove_dir_all(&path),
            _ => fs::remove_file(&path),
        };
        if let Err(e) = removed {
            tracing::debug!(path = %path.display(), error = %e, "could not prune an old handoff entry");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_request_round_trips_and_a_torn_one_is_still_on_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_restart_request(dir.path()), None);
        let r = request(7);
        write_restart_request(dir.path(), &r).unwrap();
        let file = read_restart_request(dir.path()).unwrap();
        assert_eq!(file.request, Some(r));
        assert!(file.modified.is_some());
        // A torn one is still a request on file, without its content.
        fs::write(
            dir.path().join(RESTART_REQUEST_FILE),
            b"{\"generation\": 7,",
        )
        .unwrap();
        let file = read_restart_request(dir.path()).unwrap();
        assert_eq!(file.request, None);
        assert!(file.modified.is_some());
        // A publish leaves it alone.
        write_restart_request(dir.path(), &request(8)).unwrap();
        publish(dir.path(), &sample(9)).unwrap();
        assert_eq!(
            read_restart_request(dir.path()).unwrap().request,
            Some(request(8))
        );
    }

    fn request(generation: u64) -> RestartRequest {
        RestartRequest {
            generation,
            hub: HubId::SECONDARY,
            requested_at: "2026-12-03T18:00:00Z".into(),
            exit_code: 42,
        }
    }

    #[test]
    fn a_decision_an_override_made_says_so_and_reads_back() {
        let h = Handoff {
            steered_by: Some(SteeredBy {
                kind: "drain".into(),
                hub: "primary".into(),
                until: "2026-12-04T18:00:00Z".into(),
            }),
            ..sample(8)
        };
        let json = h.to_json();
        assert!(
            json.contains("\"override\": {\n    \"kind\": \"drain\""),
            "{json}"
        );
        let back: Handoff = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
    }

    fn sample(generation: u64) -> Handoff {
        Handoff {
            endpoint: "https://10.1.80.12:6443".into(),
            token_file: "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/token".into(),
            ca_file: "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/ca.crt".into(),
            identity: Some("ctrl-b".into()),
            decided_at: "2026-12-02T10:00:00Z".into(),
            namespace: Some("kubeslice-acme".into()),
            ..crate::testing::handoff(HubId::SECONDARY, generation, Reason::Switch)
        }
    }

    #[test]
    fn the_start_of_the_hubs_silence_round_trips_as_silent_since() {
        let h = Handoff {
            silent_since: Some("2026-12-02T10:01:00Z".into()),
            ..sample(7)
        };
        let json = h.to_json();
        assert!(
            json.contains("\"silentSince\": \"2026-12-02T10:01:00Z\""),
            "{json}"
        );
        assert_eq!(
            Handoff::from_json(json.as_bytes(), Path::new("x")).unwrap(),
            h
        );
        assert!(!sample(7).to_json().contains("silentSince"));
    }

    #[test]
    fn the_time_of_the_last_move_round_trips_as_moved_at() {
        let h = Handoff {
            moved_at: Some("2026-12-02T09:58:00Z".into()),
            ..sample(7)
        };
        let json = h.to_json();
        assert!(
            json.contains("\"movedAt\": \"2026-12-02T09:58:00Z\""),
            "{json}"
        );
        assert_eq!(
            Handoff::from_json(json.as_bytes(), Path::new("x")).unwrap(),
            h
        );
        assert!(!sample(7).to_json().contains("movedAt"));
    }

    #[test]
    fn json_round_trips_with_the_documented_field_names() {
        let h = sample(7);
        let json = h.to_json();
        for field in [
            "\"hub\": \"secondary\"",
            "\"tokenFile\"",
            "\"caFile\"",
            "\"decidedAt\"",
            "\"reason\": \"switch\"",
            "\"generation\": 7",
        ] {
            assert!(json.contains(field), "{field} missing from {json}");
        }
        assert_eq!(
            Handoff::from_json(json.as_bytes(), Path::new("x")).unwrap(),
            h
        );
    }

    #[test]
    fn the_basis_round_trips_and_a_handoff_without_one_still_reads() {
        let claim = crate::claim::parse_cluster(
            br#"{"status":{"activeController":{"endpoint":"https://10.1.80.12:6443",
                "identity":"ctrl-b","lastUpdated":"2026-12-02T09:59:50Z","epoch":7}}}"#,
        )
        .unwrap()
        .unwrap();
        let h = Handoff {
            basis: Some(Basis::of(&claim)),
            ..sample(7)
        };
        let json = h.to_json();
        assert!(
            json.contains("\"lastUpdated\": \"2026-12-02T09:59:50Z\""),
            "{json}"
        );
        assert!(json.contains("\"epoch\": 7"), "{json}");
        assert!(!json.contains("override"), "{json}");
        let back = Handoff::from_json(json.as_bytes(), Path::new("x")).unwrap();
        assert_eq!(back.basis.unwrap().claim(), Ok(claim));
        // Written before bases were kept.
        let old = sample(3).to_json();
        assert!(!old.contains("basis"));
        let read = Handoff::from_json(old.as_bytes(), Path::new("x")).unwrap();
        assert_eq!(read.basis, None);
    }

    #[test]
    fn an_unreadable_basis_names_its_field() {
        let basis = |endpoint: &str, at: Option<&str>| Basis {
            endpoint: endpoint.into(),
            identity: None,
            last_updated: at.map(String::from),
            epoch: None,
        };
        let e = basis("ftp://x", None).claim().unwrap_err();
        assert!(e.starts_with("basis.endpoint must use https://"), "{e}");
        let e = basis("https://a:1", Some("yesterday")).claim().unwrap_err();
        assert!(
            e.starts_with("basis.lastUpdated is not an RFC 3339 time"),
            "{e}"
        );
    }

    #[test]
    fn env_values_are_quoted_for_sh() {
        let mut h = sample(1);
        h.token_file = "/odd/it's $HOME/`x`/token".into();
        let env = h.to_env();
        assert!(
            env.contains(r"HUB_TOKEN_FILE='/odd/it'\''s $HOME/`x`/token'"),
            "{env}"
        );
        assert!(env.starts_with("HUB_HOST_ENDPOINT='https://10.1.80.12:6443'\n"));
    }

    #[test]
    fn kubeconfig_points_at_files_and_names_the_hub() {
        let mut h = sample(1);
        h.tls_server_name = Some("hub.internal".into());
        let k = h.to_kubeconfig();
        assert!(k.contains("server: \"https://10.1.80.12:6443\""));
        assert!(k.contains("certificate-authority: \"/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/ca.crt\""));
        assert!(k.contains(
            "tokenFile: \"/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount/token\""
        ));
        assert!(k.contains("tls-server-name: \"hub.internal\""));
        assert!(k.contains("current-context: \"secondary\""));
    }

    #[test]
    fn publish_swaps_the_whole_set_and_prunes_old_versions() {
        let dir = tempfile::tempdir().unwrap();
        publish(dir.path(), &sample(1)).unwrap();
        publish(dir.path(), &sample(2)).unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap().generation, 2);
        let env = fs::read_to_string(dir.path().join(ENV_FILE)).unwrap();
        assert!(env.contains("10.1.80.12"));
        let versions: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("..") && n != DATA_LINK)
            .collect();
        assert_eq!(versions.len(), 1, "{versions:?}");
        assert!(versions[0].starts_with("..2_"));
        let mode = fs::metadata(dir.path().join(JSON_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
    }

    #[test]
    fn a_failed_publish_leaves_the_previous_decision_whole() {
        let dir = tempfile::tempdir().unwrap();
        publish(dir.path(), &sample(1)).unwrap();
        // A non-empty folder where the swap's temporary link must go makes the swap fail after
        // the new version was written; this works as root too, unlike a read-only mode.
        let blocker = dir
            .path()
            .join(format!("{DATA_LINK}.tmp-{}", std::process::id()));
        fs::create_dir_all(blocker.join("x")).unwrap();
        let failed = publish(dir.path(), &sample(2));
        assert!(
            matches!(
                failed,
                Err(HandoffError::Write {
                    step: "swap ..data",
                    ..
                })
            ),
            "{failed:?}"
        );
        assert_eq!(read(dir.path()).unwrap().unwrap().generation, 1);
        fs::remove_dir_all(&blocker).unwrap();
        publish(dir.path(), &sample(3)).unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap().generation, 3);
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("..2_"))
            .collect();
        assert!(
            leftovers.is_empty(),
            "the half-written version was not pruned"
        );
    }

    #[test]
    fn the_generation_survives_an_unreadable_decision_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(generation_on_disk(dir.path()), None);
        publish(dir.path(), &sample(41)).unwrap();
        let version = fs::read_link(dir.path().join(DATA_LINK)).unwrap();
        fs::write(dir.path().join(&version).join(JSON_FILE), b"garbage").unwrap();
        assert!(read(dir.path()).is_err());
        assert_eq!(generation_on_disk(dir.path()), Some(41));
    }

    #[test]
    fn a_generation_past_the_largest_is_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        for (generation, ok) in [
            (MAX_GENERATION, true),
            (MAX_GENERATION + 1, false),
            (u64::MAX, false),
        ] {
            let json = sample(7).to_json().replace(
                "\"generation\": 7",
                &format!("\"generation\": {generation}"),
            );
            fs::write(dir.path().join(JSON_FILE), json).unwrap();
            match read(dir.path()) {
                Ok(Some(h)) => assert!(ok && h.generation == generation, "{generation}"),
                Err(e) => {
                    assert!(!ok, "{generation}: {e}");
                    assert!(
                        e.to_string()
                            .contains("generation: expected at most 9007199254740991"),
                        "{e}"
                    );
                }
                Ok(None) => panic!("{generation}: no handoff"),
            }
        }
        // A version folder named past it does not count either.
        fs::create_dir(dir.path().join(format!("..{}_1", u64::MAX))).unwrap();
        fs::create_dir(dir.path().join("..12_1")).unwrap();
        assert_eq!(generation_on_disk(dir.path()), Some(12));
    }

    #[test]
    fn reading_an_empty_dir_is_none_and_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_none());
        fs::write(dir.path().join(JSON_FILE), b"{half").unwrap();
        assert!(matches!(read(dir.path()), Err(HandoffError::Format { .. })));
    }
}
