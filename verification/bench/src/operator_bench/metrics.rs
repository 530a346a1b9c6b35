//! What a real kube-apiserver tells of the requests it served: its Prometheus `/metrics`
//! (`apiserver_request_total`, `apiserver_longrunning_requests`) read into the fake server's
//! terms, and the connections it holds, from the kernel's socket table.

use std::collections::BTreeMap;

use crate::cluster::Requests;

/// One sample of a metric: its name, its labels, its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) value: f64,
}

impl Sample {
    /// The value of a label (empty if it has none).
    fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// The samples of Prometheus' text format (comments and malformed lines left out).
pub(crate) fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(parse_line)
        .collect()
}

/// `name{label="value",...} value [timestamp]`, or `name value [timestamp]`.
fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    rest = &inner[i + 1..];
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    // A quoted value, with `\\`, `\"` and `\n` escapes.
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                other => key.push(other),
            }
        }
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// `apiserver_request_total` by verb (the fake server's names: `create` for POST, `update`
/// for PUT, `patch` for PATCH and APPLY, `delete` for DELETE and DELETECOLLECTION, `get`,
/// `list`, `watch`, else `other`) and resource (`plural.group`, or `plural` for the core
/// group), every status code and subresource together.
///
/// Left out: requests that are not to resources (discovery, `/version`, `/metrics`, which the
/// runner itself reads to count), and those to Leases, which are the server's own: it renews
/// its identity Lease every 10 s. (No scenario that runs on the real server uses Leases.)
/// Watches are counted as they end, not as they start.
pub(crate) fn requests(samples: &[Sample]) -> Requests {
    let mut requests = Requests::new();
    for sample in samples {
        let resource = sample.label("resource");
        if sample.name != "apiserver_request_total" || resource.is_empty() {
            continue;
        }
        let group = sample.label("group");
        if resource == "leases" && group == "coordination.k8s.io" {
            continue;
        }
        let verb = match sample.label("verb") {
            "POST" => "create",
            "PUT" => "update",
            "PATCH" | "APPLY" => "patch",
            "DELETE" | "DELETECOLLECTION" => "delete",
            "GET" => "get",
            "LIST" => "list",
            "WATCH" | "WATCHLIST" => "watch",
            _ => "other",
        };
        let resource = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        *requests.entry((verb.to_string(), resource)).or_default() += sample.value;
    }
    requests
}

/// The watches of `resource` in `group` open now (`apiserver_longrunning_requests`).
pub(crate) fn open_watches(samples: &[Sample], group: &str, resource: &str) -> u64 {
    samples
        .iter()
        .filter(|s| s.name == "apiserver_longrunning_requests")
        .filter(|s| matches!(s.label("verb"), "WATCH" | "WATCHLIST"))
        .filter(|s| s.label("group") == group && s.label("resource") == resource)
        .map(|s| s.value)
        .sum::<f64>() as u64
}

/// The TCP connections to `port` on this machine that the server has not closed yet:
/// those established, and those the client has closed but the server not (`CLOSE_WAIT`),
/// from `/proc/net/tcp` and `/proc/net/tcp6`.
pub(crate) fn server_sockets(port: u16) -> Result<u64, String> {
    let mut count = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(text) => text,
            Err(_) if table.ends_with('6') => continue, // no IPv6 on this machine
            Err(error) => return Err(format!("{table}: {error}")),
        };
        count += sockets_on(&text, port);
    }
    Ok(count)
}

/// The sockets of a `/proc/net/tcp` table whose local port is `port`, established or in
/// `CLOSE_WAIT`.
fn sockets_on(table: &str, port: u16) -> u64 {
    const ESTABLISHED: &str = "01";
    const CLOSE_WAIT: &str = "08";
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|local| local.rsplit_once(':'))
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok());
            local_port == Some(port)
                && matches!(fields.get(3), Some(&ESTABLISHED) | Some(&CLOSE_WAIT))
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = r##"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="kopf.dev",resource="kopfexamples",scope="resource",subresource="",verb="POST",version="v1"} 500
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kopf.dev",resource="kopfexamples",scope="resource",subresource="status",verb="PATCH",version="v1"} 499
apiserver_request_total{code="409",component="apiserver",dry_run="",group="kopf.dev",resource="kopfexamples",scope="resource",subresource="",verb="PATCH",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",scope="cluster",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 30
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 7
apiserver_longrunning_requests{component="apiserver",group="kopf.dev",resource="kopfexamples",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 5
weird_metric{text="a \"quoted\", comma\\"} 1.5e3
"##;

    #[test]
    fn requests_are_counted_by_verb_and_resource() {
        let requests = requests(&parse(METRICS));
        let key = |verb: &str, resource: &str| (verb.to_string(), resource.to_string());
        assert_eq!(requests[&key("create", "kopfexamples.kopf.dev")], 500.0);
        assert_eq!(requests[&key("patch", "kopfexamples.kopf.dev")], 500.0);
        assert_eq!(requests[&key("list", "namespaces")], 2.0);
        assert_eq!(
            requests.len(),
            3,
            "leases and /metrics are left out: {requests:?}"
        );
    }

    #[test]
    fn open_watches_are_those_of_the_resource() {
        assert_eq!(open_watches(&parse(METRICS), "kopf.dev", "kopfexamples"), 2);
        assert_eq!(open_watches(&parse(METRICS), "", "configmaps"), 0);
    }

    #[test]
    fn escaped_label_values_are_read() {
        let samples = parse(METRICS);
        let weird = samples.iter().find(|s| s.name == "weird_metric").unwrap();
        assert_eq!(weird.label("text"), "a \"quoted\", comma\\");
        assert_eq!(weird.value, 1500.0);
    }

    #[test]
    fn sockets_are_those_the_server_holds() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:1F90 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:1F90 0100007F:A001 08 00000000:00000000 00:00000000 00000000     0        0 3 1
   3: 0100007F:A002 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4 1
   4: 0100007F:1F90 0100007F:A003 06 00000000:00000000 00:00000000 00000000     0        0 5 1
";
        // Port 0x1F90 = 8080: one established, one closed by the client only; the listener,
        // the client's own end and the TIME_WAIT are not the server's connections.
        assert_eq!(sockets_on(table, 8080), 2);
    }
}
