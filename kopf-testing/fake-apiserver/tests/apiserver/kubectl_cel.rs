//! kubectl and CRDs with CEL validation rules (`x-kubernetes-validations`): what a kubectl
//! user sees when a rule does not compile, or an object breaks one.

use crate::kubectl::setup;

/// A CRD whose spec has three rules: a plain one with a message, one with a message
/// expression, and a transition rule keeping `spec.size` immutable.
const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: celexamples.kopf.dev
spec:
  scope: Namespaced
  group: kopf.dev
  names: {kind: CelExample, plural: celexamples, singular: celexample}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-validations:
                - rule: "self.replicas <= self.maxReplicas"
                  message: "replicas must not exceed maxReplicas"
                - rule: "self.name.startsWith('kopf-')"
                  messageExpression: "'name ' + self.name + ' must start with kopf-'"
                  fieldPath: ".name"
              properties:
                replicas: {type: integer}
                maxReplicas: {type: integer}
                name: {type: string}
                size:
                  type: string
                  x-kubernetes-validations:
                    - rule: "self == oldSelf"
                      message: "size is immutable"
"#;

/// A CelExample with these spec fields (YAML, indented as spec's fields).
fn example(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: kopf.dev/v1\nkind: CelExample\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_breaking_cel_rules_are_rejected_with_the_apiservers_messages() {
    let Some((_turn, server, kubectl)) =
        setup("objects_breaking_cel_rules_are_rejected_with_the_apiservers_messages").await
    else {
        return;
    };
    let crd = kubectl.manifest("crd.yaml", CRD);
    let out = kubectl.ok(&["apply", "-f", &crd]).await;
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/celexamples.kopf.dev created"
    );
    kubectl
        .ok(&[
            "wait",
            "--for=condition=established",
            "crd/celexamples.kopf.dev",
            "--timeout=30s",
        ])
        .await;

    // One broken rule: kubectl prints the one cause after the object's name.
    let one = kubectl.manifest(
        "one.yaml",
        &example(
            "one",
            "  replicas: 5\n  maxReplicas: 3\n  name: kopf-one\n  size: small\n",
        ),
    );
    let err = kubectl.fails(&["apply", "-f", &one]).await;
    assert_eq!(
        err.trim(),
        r#"The CelExample "one" is invalid: spec: Invalid value: replicas must not exceed maxReplicas"#
    );

    // Two: kubectl lists them; the message expression makes the second one's message, at
    // the rule's fieldPath.
    let two = kubectl.manifest(
        "two.yaml",
        &example(
            "two",
            "  replicas: 5\n  maxReplicas: 3\n  name: other\n  size: small\n",
        ),
    );
    let err = kubectl.fails(&["apply", "-f", &two]).await;
    assert_eq!(
        err.trim(),
        concat!(
            "The CelExample \"two\" is invalid: \n",
            "* spec: Invalid value: replicas must not exceed maxReplicas\n",
            "* spec.name: Invalid value: name other must start with kopf-",
        )
    );

    // A valid object is created; changing its immutable field is refused by the transition
    // rule, and other changes are not.
    let good = kubectl.manifest(
        "good.yaml",
        &example(
            "good",
            "  replicas: 1\n  maxReplicas: 3\n  name: kopf-good\n  size: small\n",
        ),
    );
    let out = kubectl.ok(&["apply", "-f", &good]).await;
    assert_eq!(out.trim(), "celexample.kopf.dev/good created");
    let resized = kubectl.manifest(
        "resized.yaml",
        &example(
            "good",
            "  replicas: 2\n  maxReplicas: 3\n  name: kopf-good\n  size: large\n",
        ),
    );
    let err = kubectl.fails(&["apply", "-f", &resized]).await;
    assert_eq!(
        err.trim(),
        r#"The CelExample "good" is invalid: spec.size: Invalid value: "large": size is immutable"#
    );
    let scaled = kubectl.manifest(
        "scaled.yaml",
        &example(
            "good",
            "  replicas: 2\n  maxReplicas: 3\n  name: kopf-good\n  size: small\n",
        ),
    );
    let out = kubectl.ok(&["apply", "-f", &scaled]).await;
    assert_eq!(out.trim(), "celexample.kopf.dev/good configured");

    drop(kubectl);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_whose_rules_do_not_compile_are_rejected() {
    let Some((_turn, server, kubectl)) =
        setup("crds_whose_rules_do_not_compile_are_rejected").await
    else {
        return;
    };
    let broken = CRD.replace(
        "self.replicas <= self.maxReplicas",
        "self.replicas <= self.maxReplica",
    );
    let crd = kubectl.manifest("crd.yaml", &broken);
    let err = kubectl.fails(&["apply", "-f", &crd]).await;
    assert_eq!(
        err.trim(),
        concat!(
            "The CustomResourceDefinition \"celexamples.kopf.dev\" is invalid: ",
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ",
            "apiextensions.ValidationRule{Rule:\"self.replicas <= self.maxReplica\", Message:\"replicas must not exceed maxReplicas\", ",
            "MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: ",
            "compilation failed: ERROR: <input>:1:22: undefined field 'maxReplica'\n",
            " | self.replicas <= self.maxReplica\n",
            " | .....................^",
        )
    );
    let out = kubectl.run(&["get", "crd", "celexamples.kopf.dev"]).await;
    assert!(!out.status.success(), "the CRD was not stored");

    drop(kubectl);
    server.stop().await;
}
