//! The client certificate of an admission webhook's caller (Kopf's `sslpeer`), parsed from DER.

use serde_json::{Value, json};
use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate, X509Name};

/// The certificate that the caller of an admission webhook presented (kube-apiserver does when
/// its admission configuration gives it one), as admission handlers get it in `sslpeer`.
///
/// [`to_json`](Self::to_json) gives it in the shape of Kopf's `sslpeer` (Python's
/// `getpeercert()`), which a handler can take as `sslpeer: serde_json::Value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCertificate {
    subject: Vec<(String, String)>,
    issuer: Vec<(String, String)>,
    serial_number: String,
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
    subject_alt_names: Vec<(String, String)>,
    version: u32,
    der: Vec<u8>,
}

impl PeerCertificate {
    /// Parses a DER-encoded X.509 certificate; `None` if it is not one.
    pub(crate) fn from_der(der: &[u8]) -> Option<PeerCertificate> {
        let (_, certificate) = X509Certificate::from_der(der).ok()?;
        let timestamp = |time: x509_parser::time::ASN1Time| {
            time::OffsetDateTime::from_unix_timestamp(time.timestamp()).ok()
        };
        let subject_alt_names = match certificate.subject_alternative_name() {
            Ok(Some(extension)) => extension
                .value
                .general_names
                .iter()
                .filter_map(general_name)
                .collect(),
            _ => Vec::new(),
        };
        Some(PeerCertificate {
            subject: attributes(certificate.subject()),
            issuer: attributes(certificate.issuer()),
            serial_number: certificate
                .raw_serial_as_string()
                .replace(':', "")
                .to_uppercase(),
            not_before: timestamp(certificate.validity().not_before)?,
            not_after: timestamp(certificate.validity().not_after)?,
            subject_alt_names,
            version: certificate.version().0 + 1,
            der: der.to_vec(),
        })
    }

    /// The subject's attributes in order, by their long names: `("commonName", "...")`,
    /// `("organizationName", "...")`.
    pub fn subject(&self) -> &[(String, String)] {
        &self.subject
    }

    /// The subject's first common name (`CN`), which kube-apiserver's client certificates use
    /// as the user name.
    pub fn common_name(&self) -> Option<&str> {
        self.subject
            .iter()
            .find(|(name, _)| name == "commonName")
            .map(|(_, value)| value.as_str())
    }

    /// The issuer's attributes in order, by their long names.
    pub fn issuer(&self) -> &[(String, String)] {
        &self.issuer
    }

    /// The serial number in upper-case hexadecimal.
    pub fn serial_number(&self) -> &str {
        &self.serial_number
    }

    /// The start of the validity period.
    pub fn not_before(&self) -> time::OffsetDateTime {
        self.not_before
    }

    /// The end of the validity period.
    pub fn not_after(&self) -> time::OffsetDateTime {
        self.not_after
    }

    /// The subject alternative names as `("DNS", "name")`, `("IP Address", "127.0.0.1")`,
    /// `("email", ...)`, `("URI", ...)`.
    pub fn subject_alt_names(&self) -> &[(String, String)] {
        &self.subject_alt_names
    }

    /// The certificate as it was sent (DER), to check it further with a crate of your choice.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// The certificate in the shape of Kopf's `sslpeer` (Python's `ssl.getpeercert()`):
    /// `{"subject": [[["commonName", "..."]]], "issuer": ..., "version": 3, "serialNumber":
    /// "...", "notBefore": "Jan  1 00:00:00 2026 GMT", "notAfter": ..., "subjectAltName":
    /// [["DNS", "..."]]}`.
    pub fn to_json(&self) -> Value {
        let name = |attributes: &[(String, String)]| -> Value {
            attributes
                .iter()
                .map(|(key, value)| json!([[key, value]]))
                .collect()
        };
        let mut json = json!({
            "subject": name(&self.subject),
            "issuer": name(&self.issuer),
            "version": self.version,
            "serialNumber": self.serial_number,
            "notBefore": openssl_time(self.not_before),
            "notAfter": openssl_time(self.not_after),
        });
        if !self.subject_alt_names.is_empty() {
            json["subjectAltName"] = self
                .subject_alt_names
                .iter()
                .map(|(kind, value)| json!([kind, value]))
                .collect();
        }
        json
    }
}

/// A name's attributes by their long names (`commonName`), or dotted OIDs when unknown.
fn attributes(name: &X509Name<'_>) -> Vec<(String, String)> {
    let registry = x509_parser::objects::oid_registry();
    name.iter_attributes()
        .map(|attribute| {
            let key = x509_parser::objects::oid2sn(attribute.attr_type(), registry)
                .map(str::to_owned)
                .unwrap_or_else(|_| attribute.attr_type().to_id_string());
            let value = attribute
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|_| String::from_utf8_lossy(attribute.attr_value().data).into());
            (key, value)
        })
        .collect()
}

fn general_name(name: &GeneralName<'_>) -> Option<(String, String)> {
    let (kind, value) = match name {
        GeneralName::DNSName(dns) => ("DNS", (*dns).to_owned()),
        GeneralName::RFC822Name(email) => ("email", (*email).to_owned()),
        GeneralName::URI(uri) => ("URI", (*uri).to_owned()),
        GeneralName::IPAddress(bytes) => ("IP Address", ip_address(bytes)?),
        _ => return None,
    };
    Some((kind.to_owned(), value))
}

fn ip_address(bytes: &[u8]) -> Option<String> {
    if let Ok(octets) = <[u8; 4]>::try_from(bytes) {
        return Some(std::net::Ipv4Addr::from(octets).to_string());
    }
    let octets = <[u8; 16]>::try_from(bytes).ok()?;
    Some(std::net::Ipv6Addr::from(octets).to_string())
}

/// OpenSSL's time format, as Python prints certificates' dates: `Jan  1 00:00:00 2026 GMT`.
fn openssl_time(time: time::OffsetDateTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let time = time.to_offset(time::UtcOffset::UTC);
    format!(
        "{} {:>2} {:02}:{:02}:{:02} {} GMT",
        MONTHS[usize::from(u8::from(time.month())) - 1],
        time.day(),
        time.hour(),
        time.minute(),
        time.second(),
        time.year()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_certificate_is_read_as_kopf_reads_it() {
        let mut params =
            rcgen::CertificateParams::new(vec!["webhook.example".into(), "127.0.0.1".into()])
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kube-apiserver-admission");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        params.serial_number = Some(rcgen::SerialNumber::from(vec![0x0a, 0xbc]));
        params.not_before = time::OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        let peer = PeerCertificate::from_der(certificate.der()).expect("a certificate");
        assert_eq!(peer.common_name(), Some("kube-apiserver-admission"));
        assert_eq!(peer.serial_number(), "0ABC");
        assert_eq!(peer.der(), &certificate.der()[..]);
        let json = peer.to_json();
        assert_eq!(
            json["subject"],
            json!([
                [["commonName", "kube-apiserver-admission"]],
                [["organizationName", "system:masters"]]
            ])
        );
        assert_eq!(json["issuer"], json["subject"]);
        assert_eq!(json["version"], 3);
        assert_eq!(json["serialNumber"], "0ABC");
        assert_eq!(json["notBefore"], "Jan  1 00:00:00 2026 GMT");
        assert_eq!(
            json["subjectAltName"],
            json!([["DNS", "webhook.example"], ["IP Address", "127.0.0.1"]])
        );
    }

    #[test]
    fn garbage_is_no_certificate() {
        assert_eq!(PeerCertificate::from_der(b""), None);
        assert_eq!(PeerCertificate::from_der(b"\x30\x03\x02\x01"), None);
    }

    #[test]
    fn dates_print_as_openssl_does() {
        let time = time::OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap();
        assert_eq!(openssl_time(time), "Jan  1 00:00:00 2026 GMT");
    }
}
