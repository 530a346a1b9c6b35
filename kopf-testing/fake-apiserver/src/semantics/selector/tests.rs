//! Table tests of parsing and matching, plus property tests.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fields::*;
use super::labels::*;

/// An optional labels map, as `LabelSelector::matches` takes it.
type Labels<'a> = Option<&'a Map<String, Value>>;

/// Builds a labels map from pairs.
fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
        .collect()
}

/// Parses a label selector that must be valid.
fn sel(s: &str) -> LabelSelector {
    match LabelSelector::parse(s) {
        Ok(sel) => sel,
        Err(e) => panic!("{s:?} should parse: {e}"),
    }
}

/// Escapes a field selector value like apimachinery's `fields.EscapeValue`.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

/// Shorthand for a value set.
fn set(values: &[&str]) -> BTreeSet<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

/// Shorthand for a requirement.
fn req(key: &str, op: Operator) -> Requirement {
    Requirement {
        key: key.to_owned(),
        op,
    }
}

/// Every operator and the token/whitespace variants parse to the expected requirements.
#[test]
fn label_parse_ok() {
    use Operator::*;
    let cases: Vec<(&str, Vec<Requirement>)> = vec![
        ("", vec![]),
        ("  \t\n ", vec![]),
        ("a", vec![req("a", Exists)]),
        ("!a", vec![req("a", DoesNotExist)]),
        (" ! a ", vec![req("a", DoesNotExist)]),
        ("a=b", vec![req("a", Equals("b".into()))]),
        ("a==b", vec![req("a", Equals("b".into()))]),
        ("a!=b", vec![req("a", NotEquals("b".into()))]),
        ("a=", vec![req("a", Equals(String::new()))]),
        ("a!=", vec![req("a", NotEquals(String::new()))]),
        ("a in (b,c)", vec![req("a", In(set(&["b", "c"])))]),
        ("a in(b)", vec![req("a", In(set(&["b"])))]),
        ("a notin (b, c)", vec![req("a", NotIn(set(&["b", "c"])))]),
        ("a notin(b)", vec![req("a", NotIn(set(&["b"])))]),
        ("a in ()", vec![req("a", In(set(&[""])))]),
        ("a in (,b)", vec![req("a", In(set(&["", "b"])))]),
        ("a in (b,)", vec![req("a", In(set(&["", "b"])))]),
        ("a in (b,,c)", vec![req("a", In(set(&["", "b", "c"])))]),
        ("a in (,)", vec![req("a", In(set(&[""])))]),
        ("a in (b,b)", vec![req("a", In(set(&["b"])))]),
        ("a>5", vec![req("a", GreaterThan(5))]),
        ("a < 10", vec![req("a", LessThan(10))]),
        ("a>0005", vec![req("a", GreaterThan(5))]),
        (
            " a = b , c in ( d , e ) , !f ,g",
            vec![
                req("a", Equals("b".into())),
                req("c", In(set(&["d", "e"]))),
                req("f", DoesNotExist),
                req("g", Exists),
            ],
        ),
        (
            "example.com/app=My_value-1.x",
            vec![req("example.com/app", Equals("My_value-1.x".into()))],
        ),
        ("in=notin", vec![req("in", Equals("notin".into()))]),
        (
            "in in (in, notin)",
            vec![req("in", In(set(&["in", "notin"])))],
        ),
        ("notin", vec![req("notin", Exists)]),
        (
            "a=b,a=c",
            vec![req("a", Equals("b".into())), req("a", Equals("c".into()))],
        ),
        ("A_1.b-2", vec![req("A_1.b-2", Exists)]),
    ];
    for (input, expected) in cases {
        assert_eq!(sel(input).requirements, expected, "input {input:?}");
        assert_eq!(
            sel(input).is_empty(),
            expected.is_empty(),
            "input {input:?}"
        );
    }
}

/// Malformed label selectors are rejected with apimachinery-like messages.
#[test]
fn label_parse_errors() {
    let req = "unable to parse requirement: ";
    let ops = "in, notin, =, ==, !=, gt, lt";
    let value_rule = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    let name_rule = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let long = "x".repeat(64);
    let cases: Vec<(String, String)> = vec![
        (
            "a,".into(),
            "found '', expected: identifier after ','".into(),
        ),
        (
            "a,,b".into(),
            "found ',', expected: identifier after ','".into(),
        ),
        (
            ",".into(),
            "found ',', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            "=a".into(),
            "found '=', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            "(a)".into(),
            "found '(', expected: !, identifier, or 'end of string'".into(),
        ),
        ("a b".into(), format!("{req}found 'b', expected: {ops}")),
        ("a!b".into(), format!("{req}found '!', expected: {ops}")),
        ("a (b)".into(), format!("{req}found '(', expected: {ops}")),
        ("a in".into(), format!("{req}found '' expected: '('")),
        ("a notin b".into(), format!("{req}found 'b' expected: '('")),
        (
            "a in (b".into(),
            format!("{req}found '', expected: ',' or ')'"),
        ),
        (
            "a in (b,c".into(),
            format!("{req}found '', expected: ',' or ')'"),
        ),
        (
            "a in (".into(),
            format!("{req}found '', expected: ',', ')' or identifier"),
        ),
        (
            "a in (=)".into(),
            format!("{req}found '=', expected: ',', ')' or identifier"),
        ),
        (
            "a in (b =)".into(),
            format!("{req}found '=', expected: ',' or ')'"),
        ),
        (
            "a in (b c)".into(),
            format!("{req}found 'c', expected: ',' or ')'"),
        ),
        (
            "a in (,=)".into(),
            format!("{req}found '=', expected: ',', or identifier"),
        ),
        (
            "a in (,,)".into(),
            format!("{req}found ')', expected: ',', or identifier"),
        ),
        (
            "a in (b))".into(),
            "found ')', expected: ',' or 'end of string'".into(),
        ),
        ("!".into(), format!("{req}found '', expected: identifier")),
        (
            "!!a".into(),
            format!("{req}found '!', expected: identifier"),
        ),
        (
            "!=a".into(),
            "found '!=', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            "!a=b".into(),
            "found '=', expected: ',' or 'end of string'".into(),
        ),
        (
            "a=b=c".into(),
            "found '=', expected: ',' or 'end of string'".into(),
        ),
        (
            "a=b c".into(),
            "found 'c', expected: ',' or 'end of string'".into(),
        ),
        (
            "a=(b)".into(),
            format!("{req}found '(', expected: identifier"),
        ),
        (
            "a==!b".into(),
            format!("{req}found '!', expected: identifier"),
        ),
        (
            "a>=1".into(),
            format!("{req}found '=', expected: identifier"),
        ),
        (
            "a>b".into(),
            format!(
                "{req}values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"
            ),
        ),
        (
            "a<".into(),
            format!(
                "{req}values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
            ),
        ),
        (
            "a>99999999999999999999".into(),
            format!(
                "{req}values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be an integer"
            ),
        ),
        (
            "a>-1".into(),
            format!("{req}values[0][a]: Invalid value: \"-1\": {value_rule}"),
        ),
        (
            "a>b.".into(),
            format!(
                "{req}[values[0]: Invalid value: \"b.\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][a]: Invalid value: \"b.\": {value_rule}]"
            ),
        ),
        (
            "a=b$".into(),
            format!("{req}values[0][a]: Invalid value: \"b$\": {value_rule}"),
        ),
        (
            "a!=-b".into(),
            format!("{req}values[0][a]: Invalid value: \"-b\": {value_rule}"),
        ),
        (
            format!("a={long}"),
            format!(
                "{req}values[0][a]: Invalid value: \"{long}\": must be no more than 63 characters"
            ),
        ),
        (
            format!("a={long}-"),
            format!(
                "{req}values[0][a]: Invalid value: \"{long}-\": must be no more than 63 characters; {value_rule}"
            ),
        ),
        (
            "a in (ok,-b,c_)".into(),
            format!(
                "{req}[values[0][a]: Invalid value: \"-b\": {value_rule}, values[1][a]: Invalid value: \"c_\": {value_rule}]"
            ),
        ),
        (
            "a$b=c".into(),
            format!("{req}<nil>: Invalid value: \"a$b\": name part {name_rule}"),
        ),
        (
            "-a".into(),
            format!("{req}<nil>: Invalid value: \"-a\": name part {name_rule}"),
        ),
        (
            format!("{long}=a"),
            format!(
                "{req}<nil>: Invalid value: \"{long}\": name part must be no more than 63 characters"
            ),
        ),
        (
            "a/b/c".into(),
            format!(
                "{req}<nil>: Invalid value: \"a/b/c\": a valid label key {name_rule} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ),
        ),
        (
            "/a".into(),
            format!("{req}<nil>: Invalid value: \"/a\": prefix part must be non-empty"),
        ),
        (
            "a/".into(),
            format!(
                "{req}<nil>: Invalid value: \"a/\": name part must be non-empty; name part {name_rule}"
            ),
        ),
        (
            "Example.com/a".into(),
            format!(
                "{req}<nil>: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ),
        ),
        (
            format!("{}/a", "b".repeat(254)),
            format!(
                "{req}<nil>: Invalid value: \"{}/a\": prefix part must be no more than 253 characters",
                "b".repeat(254)
            ),
        ),
        (
            "!a$".into(),
            format!("{req}<nil>: Invalid value: \"a$\": name part {name_rule}"),
        ),
        (
            "é=1".into(),
            format!("{req}<nil>: Invalid value: \"é\": name part {name_rule}"),
        ),
    ];
    for (input, expected) in cases {
        match LabelSelector::parse(&input) {
            Ok(s) => panic!("{input:?} should be rejected, got {s:?}"),
            Err(e) => assert_eq!(e.to_string(), expected, "input {input:?}"),
        }
    }
}

/// Each operator matches as apimachinery's `Requirement.Matches` does.
#[test]
fn label_matching() {
    let web = labels(&[("app", "web"), ("tier", "front"), ("n", "7")]);
    let none = labels(&[]);
    let cases: Vec<(&str, Labels<'_>, bool)> = vec![
        ("", None, true),
        ("", Some(&web), true),
        ("app", Some(&web), true),
        ("app", Some(&none), false),
        ("app", None, false),
        ("!app", Some(&web), false),
        ("!app", Some(&none), true),
        ("!app", None, true),
        ("app=web", Some(&web), true),
        ("app==web", Some(&web), true),
        ("app=db", Some(&web), false),
        ("app=web", None, false),
        ("app=", Some(&web), false),
        ("app!=web", Some(&web), false),
        ("app!=db", Some(&web), true),
        ("app!=db", None, true),
        ("app in (db,web)", Some(&web), true),
        ("app in (db)", Some(&web), false),
        ("app in (db)", None, false),
        ("app notin (db,web)", Some(&web), false),
        ("app notin (db)", Some(&web), true),
        ("app notin (db)", None, true),
        ("n>6", Some(&web), true),
        ("n>7", Some(&web), false),
        ("n<8", Some(&web), true),
        ("n<7", Some(&web), false),
        ("n>1", None, false),
        ("app>1", Some(&web), false),
        ("app=web,tier=front", Some(&web), true),
        ("app=web,tier=back", Some(&web), false),
        ("app=web,!missing", Some(&web), true),
        ("app=web,app=db", Some(&web), false),
    ];
    for (input, labels, expected) in cases {
        assert_eq!(
            sel(input).matches(labels),
            expected,
            "{input:?} on {labels:?}"
        );
    }
}

/// Label values that are not strings are compared as JSON text, `null` as "".
#[test]
fn label_matching_non_string_values() {
    let map = match json!({"n": 5, "b": true, "z": null}) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    assert!(sel("n=5,n>4,b=true,z=,z").matches(Some(&map)));
    assert!(!sel("n=6").matches(Some(&map)));
}

/// Field selectors parse every operator, escapes and empty terms.
#[test]
fn field_parse_ok() {
    let term = |field: &str, value: &str, negated| FieldTerm {
        field: field.to_owned(),
        value: value.to_owned(),
        negated,
    };
    let cases: Vec<(&str, Vec<FieldTerm>)> = vec![
        ("", vec![]),
        (",,", vec![]),
        ("metadata.name=a", vec![term("metadata.name", "a", false)]),
        ("metadata.name==a", vec![term("metadata.name", "a", false)]),
        ("metadata.name!=a", vec![term("metadata.name", "a", true)]),
        ("metadata.name=", vec![term("metadata.name", "", false)]),
        ("a=x\\,y\\=z\\\\", vec![term("a", "x,y=z\\", false)]),
        (
            "a=1,,b!=2,",
            vec![term("a", "1", false), term("b", "2", true)],
        ),
        ("=x", vec![term("", "x", false)]),
        ("a b = c", vec![term("a b ", " c", false)]),
        ("a!x=y", vec![term("a!x", "y", false)]),
    ];
    for (input, expected) in cases {
        let parsed = match FieldSelector::parse(input) {
            Ok(p) => p,
            Err(e) => panic!("{input:?} should parse: {e}"),
        };
        assert_eq!(parsed.is_empty(), expected.is_empty(), "input {input:?}");
        assert_eq!(parsed.terms, expected, "input {input:?}");
    }
    let parsed = FieldSelector::parse("metadata.name=a,metadata.namespace!=b");
    let fields: Vec<&str> = parsed.iter().flat_map(|p| p.fields()).collect();
    assert_eq!(fields, ["metadata.name", "metadata.namespace"]);
}

/// Malformed field selectors are rejected with apimachinery-like messages.
#[test]
fn field_parse_errors() {
    let cases = [
        ("a", "invalid selector: 'a'; can't understand 'a'"),
        ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
        (
            "a=b\\",
            "invalid field selector: invalid escape sequence: \\",
        ),
        (
            "a=b\\n",
            "invalid field selector: invalid escape sequence: \\n",
        ),
        (
            "a==b=c",
            "invalid field selector: unescaped character in value: '='",
        ),
        (
            "a===b",
            "invalid field selector: unescaped character in value: '='",
        ),
        (
            "a\\,b",
            "invalid selector: 'a\\,b'; can't understand 'a\\,b'",
        ),
        (
            "a=b\\,c=d",
            "invalid field selector: unescaped character in value: '='",
        ),
    ];
    for (input, expected) in cases {
        match FieldSelector::parse(input) {
            Ok(s) => panic!("{input:?} should be rejected, got {s:?}"),
            Err(e) => assert_eq!(e.to_string(), expected, "input {input:?}"),
        }
    }
}

/// Field selectors compare the rendered value at a dotted path.
#[test]
fn field_matching() {
    let obj = json!({
        "metadata": {"name": "web", "namespace": "default", "generation": 3},
        "spec": {"enabled": true, "nothing": null, "list": [1, 2]},
    });
    let cases = [
        ("", true),
        ("metadata.name=web", true),
        ("metadata.name==web", true),
        ("metadata.name=db", false),
        ("metadata.name!=db", true),
        ("metadata.name!=web", false),
        ("metadata.name=web,metadata.namespace=default", true),
        ("metadata.name=web,metadata.namespace!=default", false),
        ("metadata.generation=3", true),
        ("spec.enabled=true", true),
        ("spec.nothing=", true),
        ("spec.missing=", true),
        ("spec.missing!=", false),
        ("metadata.name.deeper=", true),
        ("spec.list=[1\\,2]", true),
        ("status.phase=Running", false),
        ("status.phase!=Running", true),
    ];
    for (input, expected) in cases {
        let parsed = match FieldSelector::parse(input) {
            Ok(p) => p,
            Err(e) => panic!("{input:?} should parse: {e}"),
        };
        assert_eq!(parsed.matches(&obj), expected, "input {input:?}");
    }
}

/// A valid label key: optional DNS subdomain prefix, then a name.
fn key_strategy() -> impl Strategy<Value = String> {
    (
        proptest::option::of("[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?(\\.[a-z0-9]{1,4}){0,2}"),
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?",
    )
        .prop_map(|(prefix, name)| match prefix {
            Some(p) => format!("{p}/{name}"),
            None => name,
        })
}

/// A valid non-empty label value.
fn value_strategy() -> impl Strategy<Value = String> {
    "[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?"
}

/// A valid requirement as text, with optional whitespace around tokens.
fn requirement_strategy() -> impl Strategy<Value = String> {
    let ws = || "[ \t]{0,2}";
    let set = (
        any::<bool>(),
        proptest::collection::vec(value_strategy(), 0..4),
        ws(),
    )
        .prop_map(|(leading_empty, values, w)| {
            let mut items: Vec<String> = values;
            if leading_empty {
                items.insert(0, String::new());
            }
            format!("({w}{}{w})", items.join(&format!("{w},{w}")))
        });
    (
        key_strategy(),
        0..9u8,
        proptest::option::of(value_strategy()),
        any::<u32>(),
        set,
        ws(),
        ws(),
    )
        .prop_map(|(key, op, value, number, set, w1, w2)| {
            let value = value.unwrap_or_default();
            match op {
                0 => format!("{w1}{key}{w2}"),
                1 => format!("{w1}!{w2}{key}"),
                2 => format!("{key}{w1}={w2}{value}"),
                3 => format!("{key}{w1}=={w2}{value}"),
                4 => format!("{key}{w1}!={w2}{value}"),
                5 => format!("{key} in{w1}{set}"),
                6 => format!("{key} notin{w1}{set}"),
                7 => format!("{key}{w1}>{w2}{number}"),
                _ => format!("{key}{w1}<{w2}{number}"),
            }
        })
}

/// A small labels map drawn from a few keys and values, so that hits are likely.
fn labels_strategy(key: String, value: String) -> impl Strategy<Value = Map<String, Value>> {
    let keys = vec![key, "other".to_owned(), "x/y".to_owned()];
    let values = vec![value, String::new(), "v".to_owned()];
    proptest::collection::vec(
        (
            proptest::sample::select(keys),
            proptest::sample::select(values),
        ),
        0..4,
    )
    .prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect()
    })
}

/// Text built from selector tokens, to reach deep parser states.
fn token_soup() -> impl Strategy<Value = String> {
    let tokens = [
        "a", "b/c", "in", "notin", "=", "==", "!=", "!", "(", ")", ",", ">", "<", " ", "1", "-",
        "\\", "é", "",
    ];
    proptest::collection::vec(proptest::sample::select(tokens.to_vec()), 0..16)
        .prop_map(|t| t.concat())
}

proptest! {
    /// Neither parser panics on arbitrary input, nor does matching what they accept.
    #[test]
    fn parse_never_panics(input in prop_oneof![any::<String>(), token_soup()]) {
        let map = labels(&[("a", "1"), ("b/c", "")]);
        if let Ok(s) = LabelSelector::parse(&input) {
            let _ = s.matches(Some(&map));
            let _ = s.matches(None);
        }
        if let Ok(f) = FieldSelector::parse(&input) {
            let _ = f.matches(&json!({"a": {"b": 1}}));
            let _ = f.fields().count();
        }
    }

    /// Generated valid selectors parse, with one requirement per generated term.
    #[test]
    fn valid_selectors_parse(reqs in proptest::collection::vec(requirement_strategy(), 1..5)) {
        let input = reqs.join(",");
        match LabelSelector::parse(&input) {
            Ok(s) => prop_assert_eq!(s.requirements.len(), reqs.len()),
            Err(e) => prop_assert!(false, "{:?} rejected: {}", input, e),
        }
    }

    /// `key=value` matches exactly the maps holding that pair; `!=` is its negation.
    #[test]
    fn equals_and_not_equals(
        (key, value, map) in (key_strategy(), value_strategy()).prop_flat_map(|(k, v)| {
            (Just(k.clone()), Just(v.clone()), labels_strategy(k, v))
        }),
        absent in any::<bool>(),
    ) {
        let eq = sel(&format!("{key}={value}"));
        let deq = sel(&format!("{key} == {value}"));
        let ne = sel(&format!("{key}!={value}"));
        let labels = if absent { None } else { Some(&map) };
        let expected = labels.and_then(|m| m.get(&key)) == Some(&Value::String(value.clone()));
        prop_assert_eq!(eq.matches(labels), expected);
        prop_assert_eq!(deq.matches(labels), expected);
        prop_assert_eq!(ne.matches(labels), !expected);
    }

    /// `notin` is the negation of `in`, and `in` means "present with one of the values".
    #[test]
    fn in_and_notin(
        (key, value, map) in (key_strategy(), value_strategy()).prop_flat_map(|(k, v)| {
            (Just(k.clone()), Just(v.clone()), labels_strategy(k, v))
        }),
        extra in proptest::collection::vec(value_strategy(), 0..3),
    ) {
        let mut values = extra;
        values.push(value);
        let list = values.join(", ");
        let is_in = sel(&format!("{key} in ({list})"));
        let not_in = sel(&format!("{key} notin ({list})"));
        let expected = map
            .get(&key)
            .and_then(Value::as_str)
            .is_some_and(|v| values.iter().any(|x| x == v));
        prop_assert_eq!(is_in.matches(Some(&map)), expected);
        prop_assert_eq!(not_in.matches(Some(&map)), !expected);
        prop_assert!(!is_in.matches(None));
        prop_assert!(not_in.matches(None));
    }

    /// An escaped arbitrary value round-trips through a field selector.
    #[test]
    fn field_value_round_trip(value in any::<String>(), other in any::<String>()) {
        let escaped = escape(&value);
        let eq = FieldSelector::parse(&format!("metadata.name={escaped}"));
        let ne = FieldSelector::parse(&format!("metadata.name!={escaped}"));
        prop_assert!(eq.is_ok() && ne.is_ok());
        let (eq, ne) = (eq.unwrap_or_default(), ne.unwrap_or_default());
        prop_assert_eq!(eq.fields().collect::<Vec<_>>(), vec!["metadata.name"]);
        let obj = json!({"metadata": {"name": value}});
        prop_assert!(eq.matches(&obj));
        prop_assert!(!ne.matches(&obj));
        let other_obj = json!({"metadata": {"name": other}});
        prop_assert_eq!(eq.matches(&other_obj), other == value);
        prop_assert_eq!(ne.matches(&other_obj), other != value);
    }
}

/// Booleans the real server selects on read as `false` when unset, as its Go zero values.
#[test]
fn unset_booleans_select_as_false() {
    let node = json!({"metadata": {"name": "n"}, "spec": {}});
    let cordoned = json!({"metadata": {"name": "c"}, "spec": {"unschedulable": true}});
    let schedulable = FieldSelector::parse("spec.unschedulable=false").unwrap();
    assert!(schedulable.matches(&node));
    assert!(!schedulable.matches(&cordoned));
    let pod = json!({"metadata": {"name": "p"}, "spec": {"hostNetwork": null}});
    assert!(
        FieldSelector::parse("spec.hostNetwork=false")
            .unwrap()
            .matches(&pod)
    );
    // Other unset fields stay empty.
    assert!(
        FieldSelector::parse("spec.nodeName=")
            .unwrap()
            .matches(&pod)
    );
}

#[test]
fn label_selector_objects_select_as_apimachinery_reads_them() {
    let labels = json!({"app": "db", "tier": "back"});
    let labels = labels.as_object();
    let select = |selector: serde_json::Value| {
        LabelSelector::from_object(&selector).map(|s| s.matches(labels))
    };
    assert_eq!(
        select(json!({})),
        Some(true),
        "an empty selector selects everything"
    );
    assert_eq!(select(json!(null)), None, "a missing one selects nothing");
    assert_eq!(select(json!({"matchLabels": {"app": "db"}})), Some(true));
    assert_eq!(select(json!({"matchLabels": {"app": "web"}})), Some(false));
    let expressions = json!({"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["back", "mid"]},
        {"key": "legacy", "operator": "DoesNotExist"},
    ]});
    assert_eq!(select(expressions), Some(true));
    let not_in =
        json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]});
    assert_eq!(select(not_in), Some(false));
    let unknown = json!({"matchExpressions": [{"key": "app", "operator": "Near"}]});
    assert_eq!(select(unknown), None);
}
