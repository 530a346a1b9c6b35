//! The addresses a real cluster's allocators give Services: a cluster IP from the Services'
//! range and node ports, unique among all Services, kept across updates.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::status::{ApiError, ApiResult, Subject};
use crate::storage::catalog::{Builtin, ResourceDef};
use crate::storage::object;
use crate::storage::state::State;

/// The Services' cluster IP range, as kubeadm's and kind's default `10.96.0.0/12`; its
/// first address is the `kubernetes` Service's.
const SERVICE_RANGE: (Ipv4Addr, u32) = (Ipv4Addr::new(10, 96, 0, 0), 1 << 20);
/// Node ports, as `--service-node-port-range`'s default.
const NODE_PORTS: std::ops::RangeInclusive<u64> = 30000..=32767;

/// Gives a new Service its cluster IP and node ports, as the allocators do; an address asked
/// for that is taken is refused, as the real server refuses it.
pub(crate) fn allocate(state: &State, def: &ResourceDef, object: &mut Value) -> ApiResult<()> {
    if def.builtin != Some(Builtin::Service) {
        return Ok(());
    }
    let spec = &mut object["spec"];
    if spec["type"] == "ExternalName" || !spec.is_object() {
        return Ok(());
    }
    let services: Vec<Value> = state
        .objects(&def.key())
        .into_iter()
        .flat_map(|objects| objects.values())
        .map(|service| service["spec"].clone())
        .collect();
    let asked = spec["clusterIP"].as_str().unwrap_or_default().to_string();
    if asked.is_empty() {
        let taken: HashSet<&str> = services
            .iter()
            .filter_map(|s| s["clusterIP"].as_str())
            .collect();
        let (base, size) = SERVICE_RANGE;
        let free = (2..size)
            .map(|offset| Ipv4Addr::from(u32::from(base) + offset).to_string())
            .find(|ip| !taken.contains(ip.as_str()))
            .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))?;
        spec["clusterIP"] = json!(free);
    } else if asked != "None" && services.iter().any(|s| s["clusterIP"] == asked.as_str()) {
        return Err(ApiError::invalid_field(
            Subject {
                group: "",
                plural: "services",
                name: object::name(object),
            },
            "Service",
            "FieldValueInvalid",
            "spec.clusterIPs",
            &format!(
                "Invalid value: []string{{\"{asked}\"}}: failed to allocate IP {asked}: provided IP is already allocated"
            ),
        ));
    }
    let spec = &mut object["spec"];
    let ip = spec["clusterIP"].clone();
    spec["clusterIPs"] = json!([ip]);
    spec["ipFamilies"] = json!(["IPv4"]);
    spec["ipFamilyPolicy"] = json!("SingleStack");
    if matches!(spec["type"].as_str(), Some("NodePort" | "LoadBalancer")) {
        let mut taken: HashSet<u64> = services
            .iter()
            .flat_map(|s| s["ports"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["nodePort"].as_u64())
            .collect();
        for port in spec["ports"].as_array_mut().into_iter().flatten() {
            if port["nodePort"].as_u64().is_none() {
                let free = NODE_PORTS
                    .clone()
                    .find(|p| !taken.contains(p))
                    .ok_or_else(|| {
                        ApiError::internal("failed to allocate a nodePort: range is full")
                    })?;
                port["nodePort"] = json!(free);
                taken.insert(free);
            }
        }
    }
    Ok(())
}

/// Keeps what the allocators gave a Service when an update leaves it out (`kubectl replace`
/// of a manifest without them).
pub(crate) fn keep_allocations(def: &ResourceDef, old: &Value, new: &mut Value) {
    if def.builtin != Some(Builtin::Service) || !new["spec"].is_object() {
        return;
    }
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if new["spec"][field].is_null() && !old["spec"][field].is_null() {
            new["spec"][field] = old["spec"][field].clone();
        }
    }
    let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
    for port in new["spec"]["ports"].as_array_mut().into_iter().flatten() {
        if port["nodePort"].is_null()
            && let Some(previous) = old_ports.iter().find(|p| p["port"] == port["port"])
            && !previous["nodePort"].is_null()
        {
            port["nodePort"] = previous["nodePort"].clone();
        }
    }
}
