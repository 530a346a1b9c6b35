//! The operator's own servers (the liveness endpoint, the metrics, the admission webhooks)
//! against slow-loris clients, which open many connections and trickle bytes into them: a
//! normal request is answered all the same, the slow connections are closed after the header
//! timeout, those beyond the cap make room for new ones at once, and a stop is not held up
//! by them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kopf::Settings;
use kopf::operator::Operator;
use kopf::registry::{AdmissionHandler, Registry};
use kopf_testing::wait;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::activities::{free_port, http_get};
use crate::stopping::Running;
use crate::support::{examples, metrics_url, scrape, server_with_crd};

/// How often a slow client sends one more byte or line.
const TRICKLE: Duration = Duration::from_millis(100);

/// Settings whose servers give a client `header_timeout` and keep `max` connections.
fn serving(header_timeout: Duration, max: usize) -> Settings {
    let mut settings = kopf_testing::test_settings();
    settings.serving.header_timeout = header_timeout;
    settings.serving.max_connections = max;
    settings
}

/// How a slow client starts: with a request's first line, or (`Handshake`) with the first
/// bytes of a TLS ClientHello; or over TLS (`Tls`), with the first line after a complete
/// handshake.
#[derive(Clone, Copy)]
enum Start {
    Head,
    Handshake,
    Tls,
}

/// A slow-loris client: connections that each send the start of a request (or of a TLS
/// handshake), then one more header line (or byte) every [`TRICKLE`], for as long as the
/// server keeps them open.
struct SlowLoris {
    closed: Arc<AtomicUsize>,
    count: usize,
    _connections: JoinSet<()>,
}

impl SlowLoris {
    /// Opens `count` slow connections to `address`, one after another.
    async fn open(address: SocketAddr, count: usize, start: Start) -> SlowLoris {
        let closed = Arc::new(AtomicUsize::new(0));
        let mut connections = JoinSet::new();
        for _ in 0..count {
            let stream = TcpStream::connect(address).await.expect("a connection");
            let closed = closed.clone();
            match start {
                Start::Head => {
                    connections.spawn(trickle(stream, b"GET /healthz HTTP/1.1\r\n", closed));
                }
                Start::Handshake => {
                    // A handshake record's header announcing 512 bytes, then the bytes slowly.
                    connections.spawn(trickle(stream, &[0x16, 0x03, 0x01, 0x02, 0x00], closed));
                }
                Start::Tls => {
                    let stream = tls(stream).await;
                    connections.spawn(trickle(stream, b"POST /webhooks HTTP/1.1\r\n", closed));
                }
            }
        }
        SlowLoris {
            closed,
            count,
            _connections: connections,
        }
    }

    fn closed(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }

    /// Waits until the server has closed at least `count` of the connections.
    async fn wait_closed(&self, count: usize) {
        wait(&format!("{count} slow connections closed"), || async {
            (self.closed() >= count).then_some(())
        })
        .await;
    }

    /// Waits until the server has closed every connection.
    async fn wait_all_closed(&self) {
        self.wait_closed(self.count).await;
    }
}

/// Sends `first`, then a line (or a byte) every [`TRICKLE`] until the server closes the
/// connection; counts it as closed then.
async fn trickle<S>(stream: S, first: &'static [u8], closed: Arc<AtomicUsize>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let more: &[u8] = if first[0] == 0x16 {
        &[0]
    } else {
        b"X-Slow: 1\r\n"
    };
    let writing = async {
        writer.write_all(first).await?;
        loop {
            tokio::time::sleep(TRICKLE).await;
            writer.write_all(more).await?;
            writer.flush().await?;
        }
        #[allow(unreachable_code, reason = "the type of the block's errors")]
        Ok::<(), std::io::Error>(())
    };
    let reading = async {
        let mut buffer = [0u8; 1024];
        while reader.read(&mut buffer).await.unwrap_or(0) > 0 {}
    };
    tokio::select! {
        _ = writing => {}
        _ = reading => {}
    }
    closed.fetch_add(1, Ordering::SeqCst);
}

/// A TLS client connection over `stream`, trusting whatever certificate the server shows
/// (the test is about timing, not trust).
async fn tls(stream: TcpStream) -> tokio_rustls::client::TlsStream<TcpStream> {
    #[allow(
        deprecated,
        reason = "ring is the provider kube-rs builds with; rustls 0.23.48 deprecates it only \
            for its lack of post-quantum key exchange, which this test does not need"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(TrustAnything(provider)))
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").expect("an address");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .expect("a TLS handshake")
}

/// `POST /webhooks/nothing` over TLS: the status code, once answered.
async fn post(address: SocketAddr) -> std::io::Result<u16> {
    let mut stream = tls(TcpStream::connect(address).await?).await;
    let request = "POST /webhooks/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    // A TLS peer closing without close_notify is an error at the end: what came counts.
    let _ = stream.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    Ok(response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0))
}

#[derive(Debug)]
struct TrustAnything(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for TrustAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// An operator with the liveness endpoint at `port`.
fn probed(server: &kopf_testing::FakeApiServer, settings: Settings, port: u16) -> Operator {
    Operator::new(Registry::new())
        .settings(settings)
        .client(server.client())
        .liveness(format!("http://127.0.0.1:{port}/healthz"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_of_the_probes_are_closed_after_the_header_timeout() {
    let server = server_with_crd().await;
    let port = free_port();
    let settings = serving(Duration::from_secs(1), 64);
    let running = Running::ready(probed(&server, settings, port)).await;
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let slow = SlowLoris::open(address, 12, Start::Head).await;
    let (code, _) = http_get(port, "/healthz").await.expect("answered");
    assert_eq!(code, 200, "a normal probe is answered while they trickle");
    slow.wait_all_closed().await;
    running.stop().await.expect("a clean stop");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_beyond_the_cap_make_room_for_a_probe_and_do_not_hold_up_the_stop() {
    let server = server_with_crd().await;
    let port = free_port();
    // The header timeout is far away: only the cap closes connections within the test.
    let settings = serving(Duration::from_secs(3600), 4);
    let running = Running::ready(probed(&server, settings, port)).await;
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let slow = SlowLoris::open(address, 8, Start::Head).await;
    slow.wait_closed(4).await;
    let (code, _) = http_get(port, "/healthz").await.expect("answered");
    assert_eq!(code, 200, "the probe took a slow client's place");
    assert!(slow.closed() < 8, "the last ones still trickle");
    // Connections waiting for their request are closed at a stop, not waited for.
    running.stop().await.expect("a clean stop");
    slow.wait_all_closed().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_of_the_metrics_are_closed_after_the_header_timeout() {
    let server = server_with_crd().await;
    let operator = Operator::new(Registry::new())
        .settings(serving(Duration::from_secs(1), 4))
        .client(server.client())
        .metrics("http://127.0.0.1:0/metrics");
    let endpoint = operator.metrics_endpoint();
    let running = Running::ready(operator).await;
    let url = metrics_url(&endpoint).await;
    let address: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .parse()
        .expect("the metrics' address");
    let slow = SlowLoris::open(address, 12, Start::Head).await;
    let (code, body) = scrape(&url).await;
    assert_eq!(code, 200, "a normal scrape is answered while they trickle");
    assert!(body.contains("# TYPE"), "{body}");
    slow.wait_all_closed().await;
    running.stop().await.expect("a clean stop");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_of_the_webhooks_are_closed_after_the_header_timeout_or_the_cap() {
    let server = server_with_crd().await;
    let port = free_port();
    let mut settings = serving(Duration::from_secs(1), 8);
    settings.admission.server = Some(
        kopf::admission::WebhookServer::new()
            .addr(std::net::IpAddr::from([127, 0, 0, 1]))
            .port(port),
    );
    let registry = Registry::new().with(AdmissionHandler::validating(
        examples(),
        "check",
        |_| async { Ok(None) },
    ));
    let operator = Operator::new(registry)
        .settings(settings)
        .client(server.client());
    let running = Running::ready(operator).await;
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let handshakes = SlowLoris::open(address, 6, Start::Handshake).await;
    let heads = SlowLoris::open(address, 6, Start::Tls).await;
    let code = post(address).await.expect("answered");
    assert!(
        (200..500).contains(&code),
        "a normal request is answered while they trickle: {code}"
    );
    handshakes.wait_all_closed().await;
    heads.wait_all_closed().await;
    running.stop().await.expect("a clean stop");
    server.stop().await;
}

/// A request whose body trickles is answered `503` once the request timeout has passed since
/// its headers, and its connection is closed: it holds the connection no longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_request_whose_body_trickles_is_cut_at_the_request_timeout() {
    let server = server_with_crd().await;
    let port = free_port();
    let mut settings = serving(Duration::from_secs(3600), 8);
    settings.serving.request_timeout = Duration::from_secs(1);
    settings.admission.server = Some(
        kopf::admission::WebhookServer::new()
            .addr(std::net::IpAddr::from([127, 0, 0, 1]))
            .port(port),
    );
    let registry = Registry::new().with(AdmissionHandler::validating(
        examples(),
        "check",
        |_| async { Ok(None) },
    ));
    let operator = Operator::new(registry)
        .settings(settings)
        .client(server.client());
    let running = Running::ready(operator).await;
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let stream = tls(TcpStream::connect(address).await.expect("a connection")).await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let head = "POST /webhooks/check HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{";
    writer.write_all(head.as_bytes()).await.expect("sent");
    let trickling = tokio::spawn(async move {
        while writer.write_all(b" ").await.is_ok() && writer.flush().await.is_ok() {
            tokio::time::sleep(TRICKLE).await;
        }
    });
    let mut answer = Vec::new();
    let _ = reader.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("settings.serving.request_timeout"),
        "{answer}"
    );
    trickling.abort();
    running.stop().await.expect("a clean stop");
    server.stop().await;
}
