//! Decodes Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into the equivalent Kubernetes JSON, for a fixed table of built-in kinds.
//!
//! A body is the magic `k8s\0` followed by a `runtime.Unknown` envelope whose `raw` bytes hold the
//! object's message. Messages are decoded with a small table-driven schema whose field numbers come
//! from the `generated.proto` files of `k8s.io/api` and `k8s.io/apimachinery`; fields missing from
//! the table are skipped.
//!
//! Go clients (gogo-protobuf) always write non-pointer fields, even when they hold their zero
//! value. To get the JSON that the same client would have sent, a non-pointer field whose JSON tag
//! has `omitempty` is dropped when it is zero (`""`, `0`, `false`), a zero `metav1.Time` (an empty
//! message) is dropped, and empty lists and maps are dropped. Pointer fields keep whatever was sent,
//! zero included, and nested structs that were sent are kept even when empty (`"status": {}`), as
//! Go's JSON encoder does. Map keys come out sorted, as Go writes them.
//! A non-repeated field sent twice keeps its last value (nested messages are not merged).
//!
//! Covered kinds (other kinds are rejected with [`ProtobufError::UnsupportedKind`]):
//! - described by hand: `v1` Namespace (spec, status), ConfigMap, Secret, ServiceAccount, Service
//!   (spec only), Pod (spec only), with ObjectMeta, LabelSelector and the pod template;
//! - generated from the Go types of `k8s.io/api` by `scripts/protobuf-schemas.py` (module
//!   `generated`, which lists them): what kubectl's typed commands send (`create job`,
//!   `create cronjob`, `create role`..., `auth can-i`, `auth whoami`, `create token`, `drain`):
//!   Job, CronJob, the RBAC kinds, the access and token reviews, TokenRequest,
//!   PodDisruptionBudget, Eviction, PriorityClass, ResourceQuota, Binding, Ingress, the `apps/v1`
//!   workloads and Lease. Generated schemas reuse the hand-written ones they reach.
//!
//! Skipped (silently dropped) parts of the hand-written kinds: Service/Pod status; in PodSpec
//! `ephemeralContainers`, `affinity`, `hostAliases`, `dnsConfig`, `readinessGates`,
//! `topologySpreadConstraints`, `schedulingGates`, `resourceClaims`, `schedulingGroup`,
//! `evictionResponders`; in Container `resizePolicy`, `restartPolicyRules`, `volumeDevices`,
//! `lifecycle`; in SecurityContext `windowsOptions`, in PodSecurityContext `windowsOptions`;
//! volume sources other than `hostPath`, `emptyDir`, `secret`, `persistentVolumeClaim` and
//! `configMap`. In the generated kinds, the fields the generator cannot express are left out
//! with a comment (PodDisruptionBudget `status.disruptedPods`, a map of times).

mod core;
mod decoding;
mod envelope;
mod error;
mod generated;
mod kinds;
mod meta;
mod pod;
mod schema;
#[cfg(test)]
mod tests;
mod wire;

pub(crate) use envelope::decode;
pub(crate) use error::ProtobufError;
