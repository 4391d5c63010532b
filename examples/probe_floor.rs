//! The least a round can cost: both hubs read over kept-alive HTTPS with the same runtime, HTTP
//! and TLS crates the sidecar uses, and nothing else (no kube client stack, no decision, no
//! status, no metrics, no credential checks). Not a product: a yardstick for the footprint
//! benchmark, which runs it in place of a baseline build:
//!
//! cargo build --release --example probe_floor
//! cargo bench --bench failover -- --only footprint --quick --baseline target/release/examples/probe_floor
//!
//! It takes the sidecar's own flags (`--hub-endpoint=…`, `--secondary-ca-file=…`,
//! `--poll-interval=…`, `--listen=…`; others are ignored) and answers `/healthz` on `--listen`, so
//! the benchmark starts and counts it exactly as it does the sidecar.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Hub {
    authority: String,
    token: String,
    sender: SendRequest<Empty<Bytes>>,
}

fn flags() -> HashMap<String, String> {
    std::env::args()
        .skip(1)
        .filter_map(|a| {
            let (k, v) = a.strip_prefix("--")?.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

fn flag<'a>(flags: &'a HashMap<String, String>, name: &str) -> Result<&'a str> {
    flags
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| anyhow!("--{name} is required"))
}

async fn connect(flags: &HashMap<String, String>, prefix: &str) -> Result<Hub> {
    let endpoint = flag(flags, &format!("{prefix}-endpoint"))?;
    let authority = endpoint
        .strip_prefix("https://")
        .ok_or_else(|| anyhow!("--{prefix}-endpoint: expected https://HOST:PORT"))?
        .trim_end_matches('/')
        .to_string();
    let host = authority
        .rsplit_once(':')
        .map_or(authority.as_str(), |(h, _)| h);
    let pem = std::fs::read(flag(flags, &format!("{prefix}-ca-file"))?)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let token = std::fs::read_to_string(flag(flags, &format!("{prefix}-token-file"))?)?;
    let tcp = TcpStream::connect(&authority).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(host.to_string())?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(Hub {
        authority,
        token: token.trim().to_string(),
        sender,
    })
}

async fn read(hub: &mut Hub, path: &str) -> Result<usize> {
    hub.sender.ready().await?;
    let request = http::Request::get(path)
        .header(http::header::HOST, &hub.authority)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::AUTHORIZATION, format!("Bearer {}", hub.token))
        .body(Empty::new())?;
    let response = hub.sender.send_request(request).await?;
    Ok(response.into_body().collect().await?.to_bytes().len())
}

async fn healthz(listener: TcpListener) {
    while let Ok((mut socket, _)) = listener.accept().await {
        let mut buf = [0u8; 1024];
        let _ = socket.read(&mut buf).await;
        let _ = socket
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .await;
    }
}

fn main() -> Result<()> {
    let flags = flags();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let path = format!(
            "/apis/controller.kubeslice.io/v1alpha1/namespaces/{}/clusters/{}",
            flag(&flags, "namespace")?,
            flag(&flags, "cluster-name")?
        );
        let interval: Duration =
            humantime::parse_duration(flag(&flags, "poll-interval")?).context("--poll-interval")?;
        let mut hubs = [
            connect(&flags, "hub").await?,
            connect(&flags, "secondary").await?,
        ];
        tokio::spawn(healthz(TcpListener::bind(flag(&flags, "listen")?).await?));
        let mut tick = tokio::time::interval(interval);
        loop {
            tick.tick().await;
            let [a, b] = &mut hubs;
            let (a, b) = tokio::join!(read(a, &path), read(b, &path));
            a?;
            b?;
        }
    })
}
