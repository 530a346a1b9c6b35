//! The schemas of `k8s.io/api/core/v1` Pod: its spec, containers, probes and volumes (status is
//! skipped); Deployments hold the same pod template.

use super::core::LOCAL_OBJECT_REFERENCE;
use super::meta::OBJECT_META;
use super::schema::Kind::{Bool, Int32, Int64, Message, Quantity, String as Str};
use super::schema::{Kind, Schema, keep, omit, rep};

// --- k8s.io/api/core/v1: Pod ---

/// core/v1 Pod (status is skipped).
pub(crate) static POD: Schema = Schema {
    name: "Pod",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&POD_SPEC)),
    ],
};

/// core/v1 PodTemplateSpec.
pub(crate) static POD_TEMPLATE_SPEC: Schema = Schema {
    name: "PodTemplateSpec",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&POD_SPEC)),
    ],
};

/// core/v1 PodSpec (a subset; see the module documentation).
pub(crate) static POD_SPEC: Schema = Schema {
    name: "PodSpec",
    fields: &[
        rep(1, "volumes", Message(&VOLUME)),
        rep(20, "initContainers", Message(&CONTAINER)),
        rep(2, "containers", Message(&CONTAINER)),
        omit(3, "restartPolicy", Str),
        keep(4, "terminationGracePeriodSeconds", Int64),
        keep(5, "activeDeadlineSeconds", Int64),
        omit(6, "dnsPolicy", Str),
        keep(7, "nodeSelector", Kind::StringMap),
        omit(8, "serviceAccountName", Str),
        omit(9, "serviceAccount", Str),
        keep(21, "automountServiceAccountToken", Bool),
        omit(10, "nodeName", Str),
        omit(11, "hostNetwork", Bool),
        omit(12, "hostPID", Bool),
        omit(13, "hostIPC", Bool),
        keep(27, "shareProcessNamespace", Bool),
        keep(14, "securityContext", Message(&POD_SECURITY_CONTEXT)),
        rep(15, "imagePullSecrets", Message(&LOCAL_OBJECT_REFERENCE)),
        omit(16, "hostname", Str),
        omit(17, "subdomain", Str),
        omit(19, "schedulerName", Str),
        rep(22, "tolerations", Message(&TOLERATION)),
        omit(24, "priorityClassName", Str),
        keep(25, "priority", Int32),
        keep(29, "runtimeClassName", Str),
        keep(30, "enableServiceLinks", Bool),
        keep(31, "preemptionPolicy", Str),
        keep(32, "overhead", Kind::QuantityMap),
        keep(35, "setHostnameAsFQDN", Bool),
        keep(36, "os", Message(&POD_OS)),
        keep(37, "hostUsers", Bool),
        keep(40, "resources", Message(&RESOURCE_REQUIREMENTS)),
        keep(41, "hostnameOverride", Str),
    ],
};

/// core/v1 PodOS.
pub(crate) static POD_OS: Schema = Schema {
    name: "PodOS",
    fields: &[keep(1, "name", Str)],
};

/// core/v1 Toleration.
pub(crate) static TOLERATION: Schema = Schema {
    name: "Toleration",
    fields: &[
        omit(1, "key", Str),
        omit(2, "operator", Str),
        omit(3, "value", Str),
        omit(4, "effect", Str),
        keep(5, "tolerationSeconds", Int64),
    ],
};

/// core/v1 PodSecurityContext (without windowsOptions).
pub(crate) static POD_SECURITY_CONTEXT: Schema = Schema {
    name: "PodSecurityContext",
    fields: &[
        keep(1, "seLinuxOptions", Message(&SE_LINUX_OPTIONS)),
        keep(2, "runAsUser", Int64),
        keep(6, "runAsGroup", Int64),
        keep(3, "runAsNonRoot", Bool),
        rep(4, "supplementalGroups", Int64),
        keep(12, "supplementalGroupsPolicy", Str),
        keep(5, "fsGroup", Int64),
        rep(7, "sysctls", Message(&SYSCTL)),
        keep(9, "fsGroupChangePolicy", Str),
        keep(10, "seccompProfile", Message(&SECCOMP_PROFILE)),
        keep(11, "appArmorProfile", Message(&APP_ARMOR_PROFILE)),
        keep(13, "seLinuxChangePolicy", Str),
    ],
};

/// core/v1 SecurityContext (without windowsOptions).
pub(crate) static SECURITY_CONTEXT: Schema = Schema {
    name: "SecurityContext",
    fields: &[
        keep(1, "capabilities", Message(&CAPABILITIES)),
        keep(2, "privileged", Bool),
        keep(3, "seLinuxOptions", Message(&SE_LINUX_OPTIONS)),
        keep(4, "runAsUser", Int64),
        keep(8, "runAsGroup", Int64),
        keep(5, "runAsNonRoot", Bool),
        keep(6, "readOnlyRootFilesystem", Bool),
        keep(7, "allowPrivilegeEscalation", Bool),
        keep(9, "procMount", Str),
        keep(11, "seccompProfile", Message(&SECCOMP_PROFILE)),
        keep(12, "appArmorProfile", Message(&APP_ARMOR_PROFILE)),
    ],
};

/// core/v1 Capabilities.
pub(crate) static CAPABILITIES: Schema = Schema {
    name: "Capabilities",
    fields: &[rep(1, "add", Str), rep(2, "drop", Str)],
};

/// core/v1 SELinuxOptions.
pub(crate) static SE_LINUX_OPTIONS: Schema = Schema {
    name: "SELinuxOptions",
    fields: &[
        omit(1, "user", Str),
        omit(2, "role", Str),
        omit(3, "type", Str),
        omit(4, "level", Str),
    ],
};

/// core/v1 SeccompProfile.
pub(crate) static SECCOMP_PROFILE: Schema = Schema {
    name: "SeccompProfile",
    fields: &[keep(1, "type", Str), keep(2, "localhostProfile", Str)],
};

/// core/v1 AppArmorProfile.
pub(crate) static APP_ARMOR_PROFILE: Schema = Schema {
    name: "AppArmorProfile",
    fields: &[keep(1, "type", Str), keep(2, "localhostProfile", Str)],
};

/// core/v1 Sysctl.
pub(crate) static SYSCTL: Schema = Schema {
    name: "Sysctl",
    fields: &[keep(1, "name", Str), keep(2, "value", Str)],
};

/// core/v1 Container (a subset; see the module documentation).
pub(crate) static CONTAINER: Schema = Schema {
    name: "Container",
    fields: &[
        keep(1, "name", Str),
        omit(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        omit(5, "workingDir", Str),
        rep(6, "ports", Message(&CONTAINER_PORT)),
        rep(19, "envFrom", Message(&ENV_FROM_SOURCE)),
        rep(7, "env", Message(&ENV_VAR)),
        keep(8, "resources", Message(&RESOURCE_REQUIREMENTS)),
        keep(24, "restartPolicy", Str),
        rep(9, "volumeMounts", Message(&VOLUME_MOUNT)),
        keep(10, "livenessProbe", Message(&PROBE)),
        keep(11, "readinessProbe", Message(&PROBE)),
        keep(22, "startupProbe", Message(&PROBE)),
        omit(13, "terminationMessagePath", Str),
        omit(20, "terminationMessagePolicy", Str),
        omit(14, "imagePullPolicy", Str),
        keep(15, "securityContext", Message(&SECURITY_CONTEXT)),
        omit(16, "stdin", Bool),
        omit(17, "stdinOnce", Bool),
        omit(18, "tty", Bool),
    ],
};

/// core/v1 ContainerPort.
pub(crate) static CONTAINER_PORT: Schema = Schema {
    name: "ContainerPort",
    fields: &[
        omit(1, "name", Str),
        omit(2, "hostPort", Int32),
        keep(3, "containerPort", Int32),
        omit(4, "protocol", Str),
        omit(5, "hostIP", Str),
    ],
};

/// core/v1 EnvVar.
pub(crate) static ENV_VAR: Schema = Schema {
    name: "EnvVar",
    fields: &[
        keep(1, "name", Str),
        omit(2, "value", Str),
        keep(3, "valueFrom", Message(&ENV_VAR_SOURCE)),
    ],
};

/// core/v1 EnvVarSource.
pub(crate) static ENV_VAR_SOURCE: Schema = Schema {
    name: "EnvVarSource",
    fields: &[
        keep(1, "fieldRef", Message(&OBJECT_FIELD_SELECTOR)),
        keep(2, "resourceFieldRef", Message(&RESOURCE_FIELD_SELECTOR)),
        keep(3, "configMapKeyRef", Message(&KEY_SELECTOR)),
        keep(4, "secretKeyRef", Message(&KEY_SELECTOR)),
        keep(5, "fileKeyRef", Message(&FILE_KEY_SELECTOR)),
    ],
};

/// core/v1 ObjectFieldSelector.
pub(crate) static OBJECT_FIELD_SELECTOR: Schema = Schema {
    name: "ObjectFieldSelector",
    fields: &[omit(1, "apiVersion", Str), keep(2, "fieldPath", Str)],
};

/// core/v1 ResourceFieldSelector.
pub(crate) static RESOURCE_FIELD_SELECTOR: Schema = Schema {
    name: "ResourceFieldSelector",
    fields: &[
        omit(1, "containerName", Str),
        keep(2, "resource", Str),
        keep(3, "divisor", Quantity),
    ],
};

/// core/v1 ConfigMapKeySelector and SecretKeySelector (same layout).
pub(crate) static KEY_SELECTOR: Schema = Schema {
    name: "KeySelector",
    fields: &[
        keep(
            1,
            "localObjectReference",
            Kind::Inline(&LOCAL_OBJECT_REFERENCE),
        ),
        keep(2, "key", Str),
        keep(3, "optional", Bool),
    ],
};

/// core/v1 FileKeySelector.
pub(crate) static FILE_KEY_SELECTOR: Schema = Schema {
    name: "FileKeySelector",
    fields: &[
        keep(1, "volumeName", Str),
        keep(2, "path", Str),
        keep(3, "key", Str),
        keep(4, "optional", Bool),
    ],
};

/// core/v1 EnvFromSource.
pub(crate) static ENV_FROM_SOURCE: Schema = Schema {
    name: "EnvFromSource",
    fields: &[
        omit(1, "prefix", Str),
        keep(2, "configMapRef", Message(&ENV_SOURCE)),
        keep(3, "secretRef", Message(&ENV_SOURCE)),
    ],
};

/// core/v1 ConfigMapEnvSource and SecretEnvSource (same layout).
pub(crate) static ENV_SOURCE: Schema = Schema {
    name: "EnvSource",
    fields: &[
        keep(
            1,
            "localObjectReference",
            Kind::Inline(&LOCAL_OBJECT_REFERENCE),
        ),
        keep(2, "optional", Bool),
    ],
};

/// core/v1 ResourceRequirements.
pub(crate) static RESOURCE_REQUIREMENTS: Schema = Schema {
    name: "ResourceRequirements",
    fields: &[
        keep(1, "limits", Kind::QuantityMap),
        keep(2, "requests", Kind::QuantityMap),
        rep(3, "claims", Message(&RESOURCE_CLAIM)),
    ],
};

/// core/v1 ResourceClaim.
pub(crate) static RESOURCE_CLAIM: Schema = Schema {
    name: "ResourceClaim",
    fields: &[keep(1, "name", Str), omit(2, "request", Str)],
};

/// core/v1 VolumeMount.
pub(crate) static VOLUME_MOUNT: Schema = Schema {
    name: "VolumeMount",
    fields: &[
        keep(1, "name", Str),
        omit(2, "readOnly", Bool),
        keep(7, "recursiveReadOnly", Str),
        keep(3, "mountPath", Str),
        omit(4, "subPath", Str),
        keep(5, "mountPropagation", Str),
        omit(6, "subPathExpr", Str),
        rep(8, "bindMountOptions", Str),
    ],
};

/// core/v1 Probe.
pub(crate) static PROBE: Schema = Schema {
    name: "Probe",
    fields: &[
        keep(1, "handler", Kind::Inline(&PROBE_HANDLER)),
        omit(2, "initialDelaySeconds", Int32),
        omit(3, "timeoutSeconds", Int32),
        omit(4, "periodSeconds", Int32),
        omit(5, "successThreshold", Int32),
        omit(6, "failureThreshold", Int32),
        keep(7, "terminationGracePeriodSeconds", Int64),
    ],
};

/// core/v1 ProbeHandler.
pub(crate) static PROBE_HANDLER: Schema = Schema {
    name: "ProbeHandler",
    fields: &[
        keep(1, "exec", Message(&EXEC_ACTION)),
        keep(2, "httpGet", Message(&HTTP_GET_ACTION)),
        keep(3, "tcpSocket", Message(&TCP_SOCKET_ACTION)),
        keep(4, "grpc", Message(&GRPC_ACTION)),
    ],
};

/// core/v1 ExecAction.
pub(crate) static EXEC_ACTION: Schema = Schema {
    name: "ExecAction",
    fields: &[rep(1, "command", Str)],
};

/// core/v1 HTTPGetAction.
pub(crate) static HTTP_GET_ACTION: Schema = Schema {
    name: "HTTPGetAction",
    fields: &[
        omit(1, "path", Str),
        keep(2, "port", Kind::IntOrString),
        omit(3, "host", Str),
        omit(4, "scheme", Str),
        rep(5, "httpHeaders", Message(&HTTP_HEADER)),
        keep(6, "protocol", Str),
    ],
};

/// core/v1 HTTPHeader.
pub(crate) static HTTP_HEADER: Schema = Schema {
    name: "HTTPHeader",
    fields: &[keep(1, "name", Str), keep(2, "value", Str)],
};

/// core/v1 TCPSocketAction.
pub(crate) static TCP_SOCKET_ACTION: Schema = Schema {
    name: "TCPSocketAction",
    fields: &[keep(1, "port", Kind::IntOrString), omit(2, "host", Str)],
};

/// core/v1 GRPCAction.
pub(crate) static GRPC_ACTION: Schema = Schema {
    name: "GRPCAction",
    fields: &[
        keep(1, "port", Int32),
        keep(2, "service", Str),
        keep(3, "mode", Str),
    ],
};

/// core/v1 Volume.
pub(crate) static VOLUME: Schema = Schema {
    name: "Volume",
    fields: &[
        keep(1, "name", Str),
        keep(2, "volumeSource", Kind::Inline(&VOLUME_SOURCE)),
    ],
};

/// core/v1 VolumeSource (hostPath, emptyDir, secret, persistentVolumeClaim and configMap only).
pub(crate) static VOLUME_SOURCE: Schema = Schema {
    name: "VolumeSource",
    fields: &[
        keep(1, "hostPath", Message(&HOST_PATH_VOLUME_SOURCE)),
        keep(2, "emptyDir", Message(&EMPTY_DIR_VOLUME_SOURCE)),
        keep(6, "secret", Message(&SECRET_VOLUME_SOURCE)),
        keep(10, "persistentVolumeClaim", Message(&PVC_VOLUME_SOURCE)),
        keep(19, "configMap", Message(&CONFIG_MAP_VOLUME_SOURCE)),
    ],
};

/// core/v1 HostPathVolumeSource.
pub(crate) static HOST_PATH_VOLUME_SOURCE: Schema = Schema {
    name: "HostPathVolumeSource",
    fields: &[keep(1, "path", Str), keep(2, "type", Str)],
};

/// core/v1 EmptyDirVolumeSource.
pub(crate) static EMPTY_DIR_VOLUME_SOURCE: Schema = Schema {
    name: "EmptyDirVolumeSource",
    fields: &[
        omit(1, "medium", Str),
        keep(2, "sizeLimit", Quantity),
        keep(3, "mode", Int32),
    ],
};

/// core/v1 SecretVolumeSource.
pub(crate) static SECRET_VOLUME_SOURCE: Schema = Schema {
    name: "SecretVolumeSource",
    fields: &[
        omit(1, "secretName", Str),
        rep(2, "items", Message(&KEY_TO_PATH)),
        keep(3, "defaultMode", Int32),
        keep(4, "optional", Bool),
        keep(5, "defaultUser", Int64),
    ],
};

/// core/v1 ConfigMapVolumeSource.
pub(crate) static CONFIG_MAP_VOLUME_SOURCE: Schema = Schema {
    name: "ConfigMapVolumeSource",
    fields: &[
        keep(
            1,
            "localObjectReference",
            Kind::Inline(&LOCAL_OBJECT_REFERENCE),
        ),
        rep(2, "items", Message(&KEY_TO_PATH)),
        keep(3, "defaultMode", Int32),
        keep(4, "optional", Bool),
        keep(5, "defaultUser", Int64),
    ],
};

/// core/v1 PersistentVolumeClaimVolumeSource.
pub(crate) static PVC_VOLUME_SOURCE: Schema = Schema {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[keep(1, "claimName", Str), omit(2, "readOnly", Bool)],
};

/// core/v1 KeyToPath.
pub(crate) static KEY_TO_PATH: Schema = Schema {
    name: "KeyToPath",
    fields: &[
        keep(1, "key", Str),
        keep(2, "path", Str),
        keep(3, "mode", Int32),
        keep(4, "user", Int64),
    ],
};
