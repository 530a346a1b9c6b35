//! The webhooks of one write, in kube-apiserver's order: the mutating ones one by one
//! (configurations by name, entries in order, the object re-defaulted after each patch, and
//! those with `reinvocationPolicy: IfNeeded` called once more when a later one changed the
//! object), and, once the object is validated, the validating ones all at once, the first
//! error to arrive deciding.
//!
//! Nothing here holds the state's lock: the webhooks are read from the state first
//! ([`Admission::prepare`]), and the write commits afterwards.

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value, json};

use super::calling;
use crate::endpoints::shared::Shared;
use crate::semantics::patch;
use crate::semantics::status::{ApiError, ApiResult};
use crate::semantics::webhooks::{self, Attributes, FailurePolicy, Phase, Verdict, Webhook};
use crate::storage::catalog::ResourceDef;

/// The webhooks registered for a write, and what matching them needs from the state.
#[derive(Debug)]
pub(crate) struct Admission {
    mutating: Vec<Webhook>,
    validating: Vec<Webhook>,
    /// The labels of the write's namespace, for `namespaceSelector`s.
    namespace_labels: Option<Map<String, Value>>,
}

impl Admission {
    /// The webhooks a write on `def` in `namespace` may reach; `None` when none is registered,
    /// or when the resource is one that webhooks never see (their own configurations).
    pub(crate) fn prepare(shared: &Shared, def: &ResourceDef, namespace: &str) -> Option<Self> {
        if webhooks::is_exempt(&def.group, &def.plural) {
            return None;
        }
        shared.read(|state| {
            let mutating = webhooks::registered(state, Phase::Mutating);
            let validating = webhooks::registered(state, Phase::Validating);
            if mutating.is_empty() && validating.is_empty() {
                return None;
            }
            let namespaces = (String::new(), "namespaces".to_string());
            let namespace_labels = (!namespace.is_empty())
                .then(|| state.get(&namespaces, &(String::new(), namespace.to_string())))
                .flatten()
                .and_then(|ns| ns["metadata"]["labels"].as_object().cloned());
            Some(Admission {
                mutating,
                validating,
                namespace_labels,
            })
        })
    }

    /// Runs the mutating webhooks on `attributes.object`; `redecode` re-defaults the object
    /// after each patch. Warnings go to `warnings`, and with any error too.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: dropping it drops the call in flight; the object is only ever replaced
    /// whole.
    pub(crate) async fn mutate(
        &self,
        attributes: &mut Attributes,
        redecode: impl Fn(&mut Value) -> ApiResult<()>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        let mut invoked = Vec::new();
        let mut last_change = None;
        for (index, webhook) in self.mutating.iter().enumerate() {
            let outcome = self
                .mutate_once(webhook, attributes, &redecode, warnings)
                .await;
            match outcome.map_err(|e| with_warnings(e, warnings))? {
                None => {}
                Some(changed) => {
                    invoked.push(index);
                    if changed {
                        last_change = Some(index);
                    }
                }
            }
        }
        let Some(last_change) = last_change else {
            return Ok(());
        };
        for index in invoked {
            let webhook = &self.mutating[index];
            if index < last_change && webhook.reinvoke {
                let outcome = self
                    .mutate_once(webhook, attributes, &redecode, warnings)
                    .await;
                outcome.map_err(|e| with_warnings(e, warnings))?;
            }
        }
        Ok(())
    }

    /// Calls one mutating webhook if it matches and applies its patch: `None` if it was not
    /// called, else whether it changed the object.
    async fn mutate_once(
        &self,
        webhook: &Webhook,
        attributes: &mut Attributes,
        redecode: &impl Fn(&mut Value) -> ApiResult<()>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Option<bool>> {
        let Some((verdict, version)) = self.invoke(webhook, attributes).await? else {
            return Ok(None);
        };
        webhooks::record_warnings(warnings, verdict.warnings.iter().cloned());
        if !verdict.allowed {
            return Err(webhooks::denial(&webhook.name, &verdict.status));
        }
        let Some(operations) = verdict.patch else {
            return Ok(Some(false));
        };
        let Some(object) = &attributes.object else {
            return Err(webhooks::patch_without_object());
        };
        let mut patched = attributes.reviewed(&version, object);
        patch::json_patch(&mut patched, &operations)
            .map_err(|e| webhooks::unusable_patch(&webhook.name, &e.to_string()))?;
        if !patched.is_object() {
            return Err(webhooks::unusable_patch(
                &webhook.name,
                "the patched object is not a JSON object",
            ));
        }
        if attributes.subresource_kind.is_none() {
            patched["apiVersion"] = object["apiVersion"].clone();
            patched["kind"] = json!(attributes.def.kind);
            redecode(&mut patched)?;
        }
        let changed = &patched != object;
        attributes.object = Some(patched);
        Ok(Some(changed))
    }

    /// Runs the validating webhooks on the object as it will be stored, all at once; the
    /// first error to arrive fails the write. Warnings go to `warnings`, and with any error.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: dropping it drops the calls in flight.
    pub(crate) async fn validate(
        &self,
        attributes: &Attributes,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        let mut calls: FuturesUnordered<_> = self
            .validating
            .iter()
            .map(|webhook| async move { (webhook, self.invoke(webhook, attributes).await) })
            .collect();
        while let Some((webhook, outcome)) = calls.next().await {
            let verdict = match outcome {
                Ok(Some((verdict, _))) => verdict,
                Ok(None) => continue,
                Err(error) => return Err(with_warnings(error, warnings)),
            };
            webhooks::record_warnings(warnings, verdict.warnings.iter().cloned());
            if !verdict.allowed {
                let error = webhooks::denial(&webhook.name, &verdict.status);
                return Err(with_warnings(error, warnings));
            }
        }
        Ok(())
    }

    /// Calls `webhook` if the request reaches it: its verdict and the version of the
    /// resource it saw, or `None` when it does not match or its call failed and is ignored.
    async fn invoke(
        &self,
        webhook: &Webhook,
        attributes: &Attributes,
    ) -> ApiResult<Option<(Verdict, String)>> {
        let Some(version) = attributes.matched_version(webhook) else {
            return Ok(None);
        };
        if !attributes.in_selected_namespace(webhook, self.namespace_labels.as_ref())
            || !attributes.selected_object(webhook)
        {
            return Ok(None);
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let render = |object: &Value| attributes.reviewed(&version, object);
        let object = attributes.object.as_ref().map(render);
        let old_object = attributes.old_object.as_ref().map(render);
        let request = webhooks::request(
            attributes,
            &uid,
            &version,
            object.as_ref(),
            old_object.as_ref(),
        );
        match webhooks::conditions_hold(webhook, &request) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(why) => return Err(webhooks::failed_conditions(attributes, &webhook.name, &why)),
        }
        if attributes.dry_run && !webhook.supports_dry_run() {
            return Err(webhooks::no_dry_run(&webhook.name));
        }
        let review_version = match webhooks::review_version(webhook) {
            Ok(review_version) => review_version,
            Err(cause) => return failed(webhook, &cause),
        };
        let review = webhooks::review(review_version, request);
        let verdict = calling::call(webhook, &review).await.and_then(|answer| {
            webhooks::verdict(webhook, review_version, &uid, &answer)
                .map_err(|why| format!("received invalid webhook response: {why}"))
        });
        match verdict {
            Ok(verdict) => Ok(Some((verdict, version))),
            Err(cause) => failed(webhook, &cause),
        }
    }
}

/// A failed call: an error under `failurePolicy: Fail`, skipped under `Ignore`.
fn failed<T>(webhook: &Webhook, cause: &str) -> ApiResult<Option<T>> {
    match webhook.failure_policy {
        FailurePolicy::Fail => Err(webhooks::call_failure(&webhook.name, cause)),
        FailurePolicy::Ignore => {
            tracing::warn!(webhook = %webhook.name, %cause, "failed calling webhook, failing open");
            Ok(None)
        }
    }
}

/// `error` with the warnings recorded so far (they are sent even when a write fails).
fn with_warnings(mut error: ApiError, warnings: &[String]) -> ApiError {
    let mut all = warnings.to_vec();
    webhooks::record_warnings(&mut all, std::mem::take(&mut error.warnings));
    error.warnings = all;
    error
}
