//! Slow-loris clients, which open many connections and trickle bytes into them (request
//! heads, TLS handshakes, bodies): API requests are answered all the same, the slow
//! connections are closed after the header timeout, those beyond the cap make room for new
//! ones (never a watch's), and a trickling body is cut after the body timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kopf_fake_apiserver::{FakeApiServer, FakeApiServerBuilder};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::support::{DEADLINE, wait};

/// How often a slow client sends one more line or byte.
const TRICKLE: Duration = Duration::from_millis(100);

/// How a slow client starts: a request's first line; the first bytes of a TLS ClientHello;
/// or, over TLS after a whole handshake, a request's first line.
#[derive(Clone, Copy)]
enum Start {
    Head,
    Handshake,
    Tls,
}

/// A slow-loris client's connections, and how many the server closed.
struct SlowLoris {
    closed: Arc<AtomicUsize>,
    count: usize,
    _connections: JoinSet<()>,
}

impl SlowLoris {
    /// Opens `count` slow connections to the server, one after another.
    async fn open(server: &FakeApiServer, count: usize, start: Start) -> SlowLoris {
        let closed = Arc::new(AtomicUsize::new(0));
        let mut connections = JoinSet::new();
        for _ in 0..count {
            let stream = TcpStream::connect(server.addr())
                .await
                .expect("a connection");
            let closed = closed.clone();
            match start {
                Start::Head => {
                    connections.spawn(trickle(stream, b"GET /api HTTP/1.1\r\n", closed));
                }
                Start::Handshake => {
                    // A handshake record's header announcing 512 bytes, then the bytes slowly.
                    connections.spawn(trickle(stream, &[0x16, 0x03, 0x01, 0x02, 0x00], closed));
                }
                Start::Tls => {
                    let stream = tls(server, stream).await;
                    connections.spawn(trickle(stream, b"GET /api HTTP/1.1\r\n", closed));
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

    async fn wait_closed(&self, count: usize) {
        wait(&format!("{count} slow connections closed"), || async {
            (self.closed() >= count).then_some(())
        })
        .await;
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

/// A TLS connection over `stream` that trusts the server's CA.
async fn tls(
    server: &FakeApiServer,
    stream: TcpStream,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    let ca_pem = server.ca_pem().expect("a TLS server");
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(ca.expect("the CA")).expect("a root");
    }
    #[allow(
        deprecated,
        reason = "ring is the provider kube-rs builds with; rustls 0.23.48 deprecates it only \
            for its lack of post-quantum key exchange, which this test does not need"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the default versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").expect("an address");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .expect("a TLS handshake")
}

async fn start(builder: FakeApiServerBuilder) -> FakeApiServer {
    builder.start().await.expect("the server starts")
}

/// A normal request, answered: the namespaces listed.
async fn list_namespaces(server: &FakeApiServer) {
    let namespaces: Api<Namespace> = Api::all(server.client());
    let listed = namespaces
        .list(&ListParams::default())
        .await
        .expect("answered");
    assert!(!listed.items.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_after_the_header_timeout_and_others_answered() {
    let server = start(FakeApiServer::builder().header_timeout(Duration::from_secs(1))).await;
    let slow = SlowLoris::open(&server, 12, Start::Head).await;
    list_namespaces(&server).await;
    slow.wait_closed(slow.count).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_tls_clients_are_closed_after_the_header_timeout_and_others_answered() {
    let server = start(
        FakeApiServer::builder()
            .tls()
            .header_timeout(Duration::from_secs(1)),
    )
    .await;
    let handshakes = SlowLoris::open(&server, 6, Start::Handshake).await;
    let heads = SlowLoris::open(&server, 6, Start::Tls).await;
    list_namespaces(&server).await;
    handshakes.wait_closed(handshakes.count).await;
    heads.wait_closed(heads.count).await;
    server.stop().await;
}

/// Beyond the cap, slow clients make room for new connections at once (the header timeout
/// is far away), but a watch in flight keeps its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_beyond_the_cap_make_room_but_a_watch_keeps_its_place() {
    let server = start(
        FakeApiServer::builder()
            .header_timeout(Duration::from_secs(3600))
            .max_connections(4),
    )
    .await;
    // A client of its own for the watch: one connection, busy while it streams.
    let watched: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut events = watched
        .watch(&WatchParams::default(), "0")
        .await
        .expect("a watch")
        .boxed();
    let slow = SlowLoris::open(&server, 8, Start::Head).await;
    // The watch's connection is busy: only the slow ones make room.
    slow.wait_closed(4).await;
    let created: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "seen"}})).unwrap();
    let writer: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    writer
        .create(&PostParams::default(), &created)
        .await
        .expect("a normal request is answered");
    let event = tokio::time::timeout(DEADLINE, async {
        loop {
            match events.next().await {
                Some(Ok(WatchEvent::Added(map)))
                    if map.metadata.name.as_deref() == Some("seen") =>
                {
                    return map;
                }
                Some(Ok(_)) => continue,
                other => panic!("the watch ended: {other:?}"),
            }
        }
    })
    .await
    .expect("the watch goes on");
    assert_eq!(event.metadata.name.as_deref(), Some("seen"));
    assert!(slow.closed() < 8, "the last slow ones still trickle");
    drop(events);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_trickles_is_cut_after_the_body_timeout() {
    let server = start(FakeApiServer::builder().body_timeout(Duration::from_secs(1))).await;
    let stream = TcpStream::connect(server.addr())
        .await
        .expect("a connection");
    let (mut reader, mut writer) = tokio::io::split(stream);
    let head = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{";
    writer.write_all(head.as_bytes()).await.expect("sent");
    let trickling = tokio::spawn(async move {
        while writer.write_all(b" ").await.is_ok() && writer.flush().await.is_ok() {
            tokio::time::sleep(TRICKLE).await;
        }
    });
    let mut answer = [0u8; 4096];
    let read = tokio::time::timeout(DEADLINE, reader.read(&mut answer))
        .await
        .expect("answered in time")
        .expect("an answer");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within"), "{answer}");
    trickling.abort();
    server.stop().await;
}
